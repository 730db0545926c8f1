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


class ApiSettings(Section):
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16_384


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
    """this writer's chain id (default: the host name); distinct per process"""
    retry_buffer: int = Field(default=10_000, ge=1)


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


#: environment variable -> (section, key)
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "GOVSEARCH_ENGINE_URL": ("engine", "url"),
    "GOVSEARCH_ENGINE_KIND": ("engine", "kind"),
    "GOVSEARCH_ENGINE_TIMEOUT": ("engine", "timeout_s"),
    "GOVSEARCH_CATALOG_PROFILE": ("catalog", "profile"),
    "GOVSEARCH_POLICIES_DIR": ("policies", "dir"),
    "GOVSEARCH_POLICIES_INDEX_PREFIX": ("policies", "index_prefix"),
    "GOVSEARCH_MIN_HITS": ("search", "min_hits"),
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
