"""docs/configuration.md lists every setting and environment variable the product reads,
and nothing it does not read."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from agent_gateway import settings as gateway
from control_plane.config import ENV_OTHER, ENV_OVERRIDES, Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/configuration.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `([a-z_][a-z0-9_.]*)` \| (?:`(GOVSEARCH_[A-Z_]+)`)? *\|", re.MULTILINE)
ENV_ROW = re.compile(r"^\| `(GOVSEARCH_[A-Z_]+)` \|", re.MULTILINE)
ENV_READ = re.compile(r"[\"'](GOVSEARCH_[A-Z_]+)[\"']")


def _settings(model: type[BaseModel], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found |= _settings(kind, f"{prefix}{name}.")
        else:
            found.add(prefix + name)
    return found


def _documented() -> dict[str, str | None]:
    return {key: env for key, env in ROW.findall(DOC) if not key.startswith("GOVSEARCH_")}


def _env_read_in_source() -> set[str]:
    found: set[str] = set()
    for folder in ("control_plane", "agent_gateway"):
        for path in (ROOT / folder).rglob("*.py"):
            found |= set(ENV_READ.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_setting_is_documented_and_every_documented_one_exists() -> None:
    assert set(_documented()) == _settings(Settings)


def test_each_documented_variable_is_the_one_that_overrides_its_setting() -> None:
    overrides = {".".join(place): variable for variable, place in ENV_OVERRIDES.items()}
    documented = {key: env for key, env in _documented().items() if env and key in overrides}
    assert documented == overrides
    assert _documented()["default_catalog"] == "GOVSEARCH_CATALOG"


def test_every_variable_read_is_documented_and_every_documented_one_is_read() -> None:
    in_doc = set(re.findall(r"`(GOVSEARCH_[A-Z_]+)`", DOC)) - {"GOVSEARCH_TEST_ENGINE_PORT"}
    read = _env_read_in_source()
    assert set(ENV_OVERRIDES) | set(ENV_OTHER) | set(gateway.ENV_OVERRIDES) <= read
    assert read == in_doc
    assert set(ENV_ROW.findall(DOC)) <= read


UNREAD = {
    "search.default_size": "the request model's own default (10) applies",
    "search.max_size": "the request model's own maximum (50) applies",
    "search.max_intent_chars": "the request model's 512 and the agent gateway's own setting apply",
}
"""settings the model accepts that no code reads yet; the document says so"""


SHARED_NAMES = {"search.max_intent_chars"}
"""settings whose leaf name is also the agent gateway's (``GatewaySettings.max_intent_chars``)"""


def _sources() -> str:
    return "".join(
        path.read_text(encoding="utf-8")
        for folder in ("control_plane", "agent_gateway")
        for path in sorted((ROOT / folder).rglob("*.py"))
    )


def test_every_setting_is_read_somewhere_or_documented_as_unread() -> None:
    source = _sources()
    unread = {
        key for key in _settings(Settings)
        if not re.search(rf"\.{re.escape(key.split('.')[-1])}\b", source)
    }
    # a leaf name another model shares is only read when its section is named with it
    unread |= {key for key in SHARED_NAMES if not re.search(rf"\b{re.escape(key)}\b(?!`)", source)}
    assert unread == set(UNREAD)
    for key in UNREAD:
        row = next(line for line in DOC.splitlines() if line.startswith(f"| `{key}` |"))
        assert "not read" in row, key
