"""The renderer is pure, and its templates pass every value through tojson."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import control_plane.renderer as renderer

SOURCE = Path(renderer.__file__)
TEMPLATES = SOURCE.parent / "templates"
ALLOWED = {
    "__future__",
    "json",
    "orjson",  # fresh copies of kept clauses (ADR 0040): a JSON codec, pure
    "math",
    "collections.abc",
    "typing",
    "jinja2",
    "control_plane.plan",
    "control_plane.policy",
    "control_plane.bounded",  # bounded memo tables: plain dicts (its own imports: the composer's test)
    "control_plane.catalog.profile",  # type annotations only (TYPE_CHECKING)
}
FORBIDDEN = (
    "elasticsearch",
    "opensearchpy",
    "elastic_transport",
    "httpx",
    "requests",
    "urllib",
    "fastapi",
    "starlette",
    "uvicorn",
    "time",
    "datetime",
    "random",
    "uuid",
    "secrets",
    "os",
    "socket",
    "subprocess",
    "control_plane.engine",
    "control_plane.config",
)


def imported_modules() -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(SOURCE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


def test_renderer_imports_nothing_impure() -> None:
    modules = imported_modules()
    for module in modules:
        for forbidden in FORBIDDEN:
            assert module != forbidden and not module.startswith(forbidden + "."), module
    assert modules <= ALLOWED


def test_renderer_calls_no_io_builtin() -> None:
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert not called & {"open", "eval", "exec", "compile", "__import__", "input", "print"}


def test_every_template_expression_goes_through_tojson() -> None:
    expression = re.compile(r"\{\{(.*?)\}\}", re.S)
    comment = re.compile(r"\{#.*?#\}", re.S)
    for template in sorted(TEMPLATES.glob("*.j2")):
        text = comment.sub("", template.read_text(encoding="utf-8"))
        for found in expression.findall(text):
            assert found.strip().endswith("|tojson"), f"{template.name}: {{{{{found}}}}}"


def test_every_template_is_used_and_exists() -> None:
    source = SOURCE.read_text(encoding="utf-8")
    used = set(re.findall(r'"([a-z_]+\.json\.j2)"', source))
    used |= {f"pinned_{engine}.json.j2" for engine in renderer.ENGINES}
    on_disk = {p.name for p in TEMPLATES.glob("*.j2")}
    assert used == on_disk
