"""Configuration: one file (``govsearch.yaml``) plus ``GOVSEARCH_*`` environment overrides.

Lookup order for the file: ``--config`` / ``GOVSEARCH_CONFIG``, then ``./govsearch.yaml``;
a missing file means defaults. Environment variables win over the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

EngineKind = Literal["auto", "opensearch", "elasticsearch"]


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LocalEngineSettings(Section):
    port: int = 9200
    data_dir: str = ".govsearch/engine"
    heap: str = "512m"
    nodes: int = Field(default=1, ge=1)
    """``engine start`` starts this many nodes forming one cluster (``--nodes``)"""
    cluster_heap: str = "384m"
    """each node's heap when ``nodes`` is more than one"""
    start_timeout_s: float = 180.0


class EngineSettings(Section):
    url: str = "http://127.0.0.1:9200"
    kind: EngineKind = "auto"
    timeout_s: float = Field(default=5.0, gt=0)
    local: LocalEngineSettings = LocalEngineSettings()


class CatalogSettings(Section):
    profile: str = "mappings/catalog.profile.yaml"
    file: str = "data/catalog.ndjson"


class PolicySettings(Section):
    dir: str = "policies"
    index_prefix: str = "govsearch-policies"


class SearchSettings(Section):
    min_hits: int = Field(default=3, ge=1)
    default_size: int = Field(default=10, ge=1)
    max_size: int = Field(default=50, ge=1)
    max_intent_chars: int = Field(default=512, ge=1)
    plan_cache_size: int = Field(default=4096, ge=0)
    require_policy_match: bool = False
    alias_watch_interval_s: float = Field(default=1.0, ge=0)
    """how often a serving process re-reads the live policies alias (0: on every request); a
    promotion made through the process itself is picked up at once"""


class ApiSettings(Section):
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16_384
    """bodies over this many bytes (declared or received) get 413 ``request_too_large``"""
    request_deadline_s: float | None = Field(default=None, gt=0)
    """a search or compile request's total budget, engine calls included; past it the
    request answers 503 ``deadline_exceeded``. None: the engine timeout plus one second"""
    secure_cookies: bool = False
    """mark the console's cookies ``Secure`` even over plain http (behind a TLS-terminating
    proxy); they are always ``Secure`` on a request that arrived over https"""


class AuthSettings(Section):
    """API keys (see ``control_plane.lifecycle.keys``): where their hashes are kept, and
    whether the search endpoints need one too (workflow and audit endpoints always do)."""

    keys_index: str = "govsearch-api-keys"
    search_requires_key: bool = False
    #: ``POST /v1/compile`` and ``explain: true`` without a key with the author, approver or
    #: auditor role: for local development only (they show margin weights, sponsored and
    #: hidden ids, every conflict decision)
    open_internals: bool = False


class LlmSettings(Section):
    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: str | None = None
    timeout_s: float = 10.0


class AuditSettings(Section):
    """Decision records (see ``docs/audit.md``): where they go and what they keep."""

    sink: Literal["jsonl", "engine"] = "jsonl"
    path: str = ".govsearch/audit/decisions.jsonl"
    """the JSONL sink's decisions file; outcome events go to ``events.jsonl`` beside it"""
    index: str = "govsearch-audit"
    store_raw_intent: bool = True
    """False: records keep the intent's sha256 and a redacted form, never the text"""
    instance_id: str | None = None
    """this writer's chain id; default: ``<host>:<pid>:<random>``, a new chain per process.
    When set, it must be distinct per process (a restarted writer resumes its chain)"""
    retry_buffer: int = Field(default=10_000, ge=1)
    key_file: str = ".govsearch/audit.key"
    """the HMAC key ring (``KEY_ID:SECRET`` lines; the last one seals); keep it away from the log"""
    key: str | None = None
    """one more key, ``KEY_ID:SECRET`` (e.g. from a secret manager): it seals when set"""
    generate_key: bool = True
    """no key anywhere: create ``key_file`` (0600) with a fresh key (demo); false: refuse to start"""
    checkpoint_path: str | None = None
    """the checkpoint file; default: ``checkpoints.jsonl`` beside the JSONL log, or the
    index ``<index>-checkpoints`` with the engine sink"""
    checkpoint_every_records: int = Field(default=100, ge=1)
    checkpoint_every_s: float = Field(default=60.0, gt=0)


class TelemetrySettings(Section):
    otlp_endpoint: str | None = None
    """OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces; None: no export"""
    service_name: str = "govsearch"


class Settings(Section):
    engine: EngineSettings = EngineSettings()
    catalog: CatalogSettings = CatalogSettings()
    policies: PolicySettings = PolicySettings()
    search: SearchSettings = SearchSettings()
    api: ApiSettings = ApiSettings()
    auth: AuthSettings = AuthSettings()
    llm: LlmSettings = LlmSettings()
    audit: AuditSettings = AuditSettings()
    telemetry: TelemetrySettings = TelemetrySettings()

    def request_deadline_s(self) -> float:
        """``api.request_deadline_s``, or a little above the per-call engine timeout."""
        return self.api.request_deadline_s or self.engine.timeout_s + 1.0


#: environment variable -> (section, key)
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "GOVSEARCH_ENGINE_URL": ("engine", "url"),
    "GOVSEARCH_ENGINE_KIND": ("engine", "kind"),
    "GOVSEARCH_ENGINE_TIMEOUT": ("engine", "timeout_s"),
    "GOVSEARCH_CATALOG_PROFILE": ("catalog", "profile"),
    "GOVSEARCH_POLICIES_DIR": ("policies", "dir"),
    "GOVSEARCH_POLICIES_INDEX_PREFIX": ("policies", "index_prefix"),
    "GOVSEARCH_MIN_HITS": ("search", "min_hits"),
    "GOVSEARCH_REQUEST_DEADLINE": ("api", "request_deadline_s"),
    "GOVSEARCH_SECURE_COOKIES": ("api", "secure_cookies"),
    "GOVSEARCH_KEYS_INDEX": ("auth", "keys_index"),
    "GOVSEARCH_SEARCH_REQUIRES_KEY": ("auth", "search_requires_key"),
    "GOVSEARCH_OPEN_INTERNALS": ("auth", "open_internals"),
    "GOVSEARCH_LLM_BASE_URL": ("llm", "base_url"),
    "GOVSEARCH_LLM_MODEL": ("llm", "model"),
    "GOVSEARCH_LLM_API_KEY": ("llm", "api_key"),
    "GOVSEARCH_LLM_TIMEOUT": ("llm", "timeout_s"),
    "GOVSEARCH_AUDIT_SINK": ("audit", "sink"),
    "GOVSEARCH_AUDIT_PATH": ("audit", "path"),
    "GOVSEARCH_AUDIT_STORE_RAW_INTENT": ("audit", "store_raw_intent"),
    "GOVSEARCH_AUDIT_INSTANCE_ID": ("audit", "instance_id"),
    "GOVSEARCH_AUDIT_KEY_FILE": ("audit", "key_file"),
    "GOVSEARCH_AUDIT_KEY": ("audit", "key"),
    "GOVSEARCH_AUDIT_GENERATE_KEY": ("audit", "generate_key"),
    "GOVSEARCH_AUDIT_CHECKPOINT_PATH": ("audit", "checkpoint_path"),
    "GOVSEARCH_AUDIT_CHECKPOINT_EVERY_RECORDS": ("audit", "checkpoint_every_records"),
    "GOVSEARCH_AUDIT_CHECKPOINT_EVERY_S": ("audit", "checkpoint_every_s"),
    "GOVSEARCH_OTLP_ENDPOINT": ("telemetry", "otlp_endpoint"),
}


def load_settings(
    path: str | Path | None = None, environ: dict[str, str] | None = None
) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    candidate = path or environ.get("GOVSEARCH_CONFIG") or "govsearch.yaml"
    data: dict[str, Any] = {}
    file = Path(candidate)
    if file.is_file():
        loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{file}: the configuration must be a mapping")
        data = loaded
    elif path is not None:
        raise FileNotFoundError(f"configuration file not found: {file}")
    for variable, (section, key) in ENV_OVERRIDES.items():
        if environ.get(variable):
            data.setdefault(section, {})[key] = environ[variable]
    return Settings.model_validate(data)


PROJECT_ROOT = Path(__file__).resolve().parent.parent


def project_path(path: str | Path) -> Path:
    """A project file (mappings, policies, data): as given when it exists (absolute, or
    relative to the working directory), else relative to the source checkout."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return PROJECT_ROOT / candidate
