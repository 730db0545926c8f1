"""Configuration: one file (``govsearch.yaml``) plus ``GOVSEARCH_*`` environment overrides.

Lookup order for the file: ``--config`` / ``GOVSEARCH_CONFIG``, then ``./govsearch.yaml``;
a missing file means defaults. Environment variables win over the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr

from control_plane import yaml_aliases

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
    connections: int = Field(default=64, ge=1)
    """connections kept open to the engine (the client's pool; OpenSearch's urllib3 default
    is 1): at least ``api.threads`` plus the service's tier pool, so no request opens and
    drops a connection of its own"""
    local: LocalEngineSettings = LocalEngineSettings()


class CatalogSettings(Section):
    profile: str = "mappings/catalog.profile.yaml"
    """the catalog profile YAML (field roles, money, display; it names the mapping)"""
    file: str = "data/catalog.ndjson"
    """the products, one JSON object per line (``load-catalog``, ``demo``)"""
    policies_dir: str | None = None
    """this catalog's policy directory; None: ``policies.dir``"""
    policies_index_prefix: str | None = None
    """this catalog's policy indices and workflow state; None: ``policies.index_prefix``
    for the ``catalog`` section, ``<policies.index_prefix>-<name>`` for a named catalog"""


class PolicySettings(Section):
    dir: str = "policies"
    index_prefix: str = "govsearch-policies"
    move_lease_s: float = Field(default=60.0, ge=0)
    """how long an environment move stays in the hands of the process making it: a move
    whose process died before writing its history event is completed by any other process
    after this long, or at once by one on the same host that sees the process gone
    (ADR 0053)"""


class SearchSettings(Section):
    min_hits: int = Field(default=3, ge=1)
    default_size: int = Field(default=10, ge=1)
    max_size: int = Field(default=50, ge=1)
    max_intent_chars: int = Field(default=512, ge=1)
    plan_cache_size: int = Field(default=4096, ge=0)
    require_policy_match: bool = False
    alias_watch_interval_s: float = Field(default=1.0, ge=0)
    """how often a serving process re-reads the live policies alias and the catalog alias
    (0: on every request); a promotion made through the process itself is picked up at once"""
    tier_batching: Literal["together", "strict_first", "cheap_first", "serial"] = "serial"
    """how the fallback tiers of a plan not run before are sent: one request per tier, strict
    alone then relaxed and broad together, strict and relaxed together then broad (ADR
    0032), or all in one ``_msearch``; a plan that ran before sends every tier up to where
    it stopped last time in one request (ADR 0013)"""
    speculation: bool = True
    """a plan miss (of a request without a user, or whose user's purchases are cached) whose
    intent shares no word with any trigger phrase sends its percolation and the first tiers
    of the plan it gets when nothing is matched in one ``_msearch``; the percolation decides
    whether those answers are served (ADR 0048). False: the percolation first, then the tiers"""


class ApiSettings(Section):
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 16_384
    """bodies over this many bytes (declared or received) get 413 ``request_too_large``"""
    request_deadline_s: float | None = Field(default=None, gt=0)
    """a search or compile request's total budget, engine calls included; past it the
    request answers 503 ``deadline_exceeded``. None: the engine timeout plus one second"""
    head_timeout_s: float = Field(default=20.0, gt=0)
    """a request's line and headers not all arrived this long after their first byte get
    408 ``request_timeout`` and the connection is closed (nginx's ``client_header_timeout``;
    a connection on which no request begins is closed after as long). ADR 0055"""
    body_timeout_s: float = Field(default=20.0, gt=0)
    """a request body still coming that goes this long without a byte gets 408
    ``request_timeout`` and the connection is closed (nginx's ``client_body_timeout``: the
    time between two reads, not the whole upload). ADR 0055"""
    body_min_bytes_per_s: float = Field(default=500.0, ge=0)
    """a request body must also be whole ``body_timeout_s`` after it began plus a second per
    this many bytes received (at most ``max_body_bytes`` of them), else 408 as above: a
    body trickled a byte at a time is cut (Apache ``mod_reqtimeout``'s ``MinRate``); 0:
    no such bound. ADR 0055"""
    threads: int = Field(default=40, ge=1)
    """threads running requests' synchronous work (engine calls, the wait for the audit
    fsync): the size of the API's thread pool (anyio's limiter)"""
    access_log: bool = True
    """one plain line per request on stderr (``govsearch serve``); false: none"""
    cached_on_loop: bool = True
    """a search its cached plan serves with one engine call runs on the event loop (no
    thread-pool hop, the engine call and the audit wait awaited; ADR 0030); false: every
    search runs in the thread pool"""
    fast_lane: bool = True
    """a plainly well-formed ``POST /v1/search`` is answered in front of the ASGI middleware
    stack, as the stack would answer it (ADR 0036); false: every request takes the stack"""
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
    queue_size: int = Field(default=10_000, ge=1, validation_alias=AliasChoices("queue_size", "retry_buffer"))
    """records a log holds before they are written (queued for the background writer, or
    held while the sink fails); when full, requests are refused with 503 ``audit_backlog``.
    (``retry_buffer``, its old name, is still read)"""
    batch: int = Field(default=256, ge=1)
    """records the background writer appends (and fsyncs) at once, at most"""
    commit: Literal["group", "written", "queued"] = "group"
    """``group``: a request is answered once its record is synced to disk (batched with
    others; survives a power loss); ``written``: once it is written to the file, the sync
    following (survives a killed process, not a power loss; on a file a search on the event
    loop writes its own record, ADR 0050); ``queued``: as soon as it is queued (faster; a crash
    can lose answered requests' records). ADR 0034"""
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


class UnknownCatalogError(ValueError):
    """A catalog name the configuration's ``catalogs`` does not declare."""


class UnreadableConfigError(OSError):
    """A configuration file that is there but cannot be read (permissions, a directory, an
    I/O error): a usage error, as a missing ``--config`` is."""


class Settings(Section):
    engine: EngineSettings = EngineSettings()
    catalog: CatalogSettings = CatalogSettings()
    """the catalog the commands use: the section itself, or the selected named catalog"""
    catalogs: dict[str, CatalogSettings] = Field(default_factory=dict)
    """named catalogs (name -> profile, file, policies); ``--catalog NAME`` selects one"""
    default_catalog: str | None = None
    """the named catalog used without ``--catalog`` (``GOVSEARCH_CATALOG``); None: the
    ``catalog`` section"""
    _selected: str = PrivateAttr(default="default")

    def move_lease_s(self) -> float:
        """``policies.move_lease_s``, raised to twice ``engine.timeout_s`` when it is shorter:
        a move in flight waits for the engine up to that long per call, and a shorter lease
        would let another process drop a move still being made (its owner then fails it;
        ADR 0053). A configuration with a long engine timeout stays valid."""
        return max(self.policies.move_lease_s, 2 * self.engine.timeout_s)

    @property
    def selected_catalog(self) -> str:
        """The name of the catalog in use (:meth:`select`; ``default``: the ``catalog`` section)."""
        return self._selected
    policies: PolicySettings = PolicySettings()
    search: SearchSettings = SearchSettings()
    api: ApiSettings = ApiSettings()
    auth: AuthSettings = AuthSettings()
    llm: LlmSettings = LlmSettings()
    audit: AuditSettings = AuditSettings()
    telemetry: TelemetrySettings = TelemetrySettings()

    def catalog_names(self) -> list[str]:
        return sorted(self.catalogs)

    def select(self, name: str | None) -> Settings:
        """These settings with ``catalog`` and ``policies`` set to the named catalog's; None:
        ``default_catalog``, else unchanged; ``default`` (unless ``catalogs`` declares one):
        the ``catalog`` section. Raises :class:`UnknownCatalogError` for an unknown name."""
        name = name or self.default_catalog
        if name is None or name == self.selected_catalog:
            return self._as_default() if self.selected_catalog == "default" else self
        if name == "default" and name not in self.catalogs:
            return self._named(self.model_copy(), name)
        if name not in self.catalogs:
            known = ", ".join(sorted({"default", *self.catalog_names()}))
            raise UnknownCatalogError(f"unknown catalog {name!r} (known: {known})")
        chosen = self.catalogs[name]
        policies = self.policies.model_copy(update={
            "dir": chosen.policies_dir or self.policies.dir,
            "index_prefix": chosen.policies_index_prefix or f"{self.policies.index_prefix}-{name}",
        })
        return self._named(self.model_copy(update={"catalog": chosen, "policies": policies}), name)

    def _as_default(self) -> Settings:
        """These settings for the ``catalog`` section: its own ``policies_dir`` and
        ``policies_index_prefix``, where it sets them, in place of ``policies.dir`` and
        ``policies.index_prefix`` (a named catalog falls back on those, never on these)."""
        own = {"dir": self.catalog.policies_dir, "index_prefix": self.catalog.policies_index_prefix}
        update = {key: value for key, value in own.items() if value and value != getattr(self.policies, key)}
        if not update:
            return self
        return self.model_copy(update={"policies": self.policies.model_copy(update=update)})

    @staticmethod
    def _named(settings: Settings, name: str) -> Settings:
        settings._selected = name
        return settings

    def request_deadline_s(self) -> float:
        """``api.request_deadline_s``, or a little above the per-call engine timeout."""
        return self.api.request_deadline_s or self.engine.timeout_s + 1.0


#: environment variable -> (section, key)
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "GOVSEARCH_ENGINE_URL": ("engine", "url"),
    "GOVSEARCH_ENGINE_KIND": ("engine", "kind"),
    "GOVSEARCH_ENGINE_TIMEOUT": ("engine", "timeout_s"),
    "GOVSEARCH_CATALOG_PROFILE": ("catalog", "profile"),
    "GOVSEARCH_CATALOG_FILE": ("catalog", "file"),
    "GOVSEARCH_POLICIES_DIR": ("policies", "dir"),
    "GOVSEARCH_POLICIES_INDEX_PREFIX": ("policies", "index_prefix"),
    "GOVSEARCH_POLICIES_MOVE_LEASE": ("policies", "move_lease_s"),
    "GOVSEARCH_MIN_HITS": ("search", "min_hits"),
    "GOVSEARCH_TIER_BATCHING": ("search", "tier_batching"),
    "GOVSEARCH_PLAN_CACHE_SIZE": ("search", "plan_cache_size"),
    "GOVSEARCH_SEARCH_SPECULATION": ("search", "speculation"),
    "GOVSEARCH_REQUEST_DEADLINE": ("api", "request_deadline_s"),
    "GOVSEARCH_API_HEAD_TIMEOUT": ("api", "head_timeout_s"),
    "GOVSEARCH_API_BODY_TIMEOUT": ("api", "body_timeout_s"),
    "GOVSEARCH_API_BODY_MIN_RATE": ("api", "body_min_bytes_per_s"),
    "GOVSEARCH_API_THREADS": ("api", "threads"),
    "GOVSEARCH_API_ACCESS_LOG": ("api", "access_log"),
    "GOVSEARCH_API_CACHED_ON_LOOP": ("api", "cached_on_loop"),
    "GOVSEARCH_API_FAST_LANE": ("api", "fast_lane"),
    "GOVSEARCH_ENGINE_CONNECTIONS": ("engine", "connections"),
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
    "GOVSEARCH_AUDIT_QUEUE_SIZE": ("audit", "queue_size"),
    "GOVSEARCH_AUDIT_BATCH": ("audit", "batch"),
    "GOVSEARCH_AUDIT_COMMIT": ("audit", "commit"),
    "GOVSEARCH_OTLP_ENDPOINT": ("telemetry", "otlp_endpoint"),
}


#: environment variables read besides :data:`ENV_OVERRIDES`: name -> what it does
ENV_OTHER: dict[str, str] = {
    "GOVSEARCH_CONFIG": "the configuration file (like ``--config``)",
    "GOVSEARCH_CATALOG": "the named catalog to use (like ``--catalog``; ``default_catalog``)",
}


def load_settings(
    path: str | Path | None = None,
    environ: dict[str, str] | None = None,
    catalog: str | None = None,
) -> Settings:
    """The settings of ``path`` (module docstring) with the environment's overrides, for
    ``catalog`` (a name of ``catalogs``), else ``GOVSEARCH_CATALOG``, else ``default_catalog``."""
    environ = dict(os.environ if environ is None else environ)
    candidate = path or environ.get("GOVSEARCH_CONFIG") or "govsearch.yaml"
    data: dict[str, Any] = {}
    file = Path(candidate)
    if file.is_file():
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as error:  # (not UTF-8 is a ValueError: invalid input, as bad YAML)
            reason = error.strerror or error
            raise UnreadableConfigError(f"cannot read the configuration file {file}: {reason}") from error
        loaded = yaml_aliases.safe_load(text) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{file}: the configuration must be a mapping")
        data = loaded
    elif path is not None:
        raise FileNotFoundError(f"configuration file not found: {file}")
    for variable, (section, key) in ENV_OVERRIDES.items():
        if environ.get(variable):
            data.setdefault(section, {})[key] = environ[variable]
    settings = Settings.model_validate(data)
    return settings.select(catalog or environ.get("GOVSEARCH_CATALOG") or None)


PROJECT_ROOT = Path(__file__).resolve().parent.parent


def project_path(path: str | Path) -> Path:
    """A project file (mappings, policies, data): as given when it exists (absolute, or
    relative to the working directory), else relative to the source checkout."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return PROJECT_ROOT / candidate
