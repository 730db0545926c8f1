"""A YAML document whose aliases stand for millions of nodes ("billion laughs") is refused at
the anchored node, in every place govsearch reads YAML, before anything walks it; anchors
and merge keys as authors use them still load. Before this, a 700-byte policy file took 27 s
and 2.2 GB at 9**8 strings and ran the machine out of memory at 9**9 (``policy check``, the
console's draft form, a policy test file)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import control_plane.loader as loader
from control_plane import yaml_aliases
from control_plane.bootstrap import read_personas
from control_plane.catalog.personas import load_personas
from control_plane.catalog.profile import CatalogProfileError, load_profile
from control_plane.catalog.supplement import load_supplement
from control_plane.catalog.taxonomy import CategoryRulesError, load_taxonomy
from control_plane.config import load_settings
from control_plane.errors import PolicyLoadError
from control_plane.lifecycle.regression import QueryFileError, load_queries
from control_plane.lifecycle.suite import SuiteLoadError, load_suite
from control_plane.loader import load_policy_set
from tests.checkout import checkout_env
from tests.hostile.bounded import bounded

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def laughs(depth: int, key: str = "phrase") -> str:
    """A policy whose trigger's one list stands for 9**depth strings, through ``depth``
    anchored lists of nine aliases each (the last anchor is on line ``depth``)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, depth)]
    return "\n".join(lines) + f"\nid: laughs\ntrigger: {{{key}: *l{depth - 1}}}\n"


def long_laughs(length: int, count: int) -> str:
    """A policy whose trigger lists one anchored phrase of ``length`` characters and ``count``
    aliases to it: a file of about ``length + 4 * count`` bytes standing for ``length *
    count`` characters (one node per alias: few enough nodes for a bound on nodes alone)."""
    aliases = ", ".join(["*long"] * count)
    return (
        "id: long-laughs\ntitle: t\nowner: o\npriority: 1\n"
        f"trigger:\n  phrase: [&long {'x' * length}, {aliases}]\n"
        "rules:\n  - economics: {margin_weight: 1.0}\n"
    )


def directory(tmp_path: Path, files: dict[str, str]) -> Path:
    shutil.copy(POLICIES / "governance.yaml", tmp_path / "governance.yaml")
    shutil.copytree(POLICIES / "vocabularies", tmp_path / "vocabularies")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def load_errors(root: Path) -> list[tuple[str, int, int, str]]:
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(root)
    return [(e.file, e.line, e.column, e.code) for e in raised.value.errors]


def test_the_measure_counts_what_a_walk_visits_without_walking_it() -> None:
    assert yaml_aliases.measure(yaml.compose("[a, b, {c: d}]")) == 6
    shared = yaml.compose("base: &b [x, y]\none: *b\ntwo: *b\n")
    assert yaml_aliases.measure(shared) == 1 + 3 + 3 * 3  # three keys, the list walked three times
    with pytest.raises(yaml_aliases.AliasError) as raised:
        yaml_aliases.measure(yaml.compose(laughs(10)))  # 9**10 strings: counted, not built
    assert raised.value.problem_mark.line == 9  # l9, the trigger's: the most repeated walk
    assert "nodes and characters of this document (it has 103; at most 100,000 may be repeated)" in str(
        raised.value
    )


def test_the_measure_weighs_the_characters_an_alias_repeats() -> None:
    """Each alias to a 10,000-character string repeats those characters: 1,000 of them are
    10 million characters, however few nodes they are."""
    with pytest.raises(yaml_aliases.AliasError) as raised:
        yaml_aliases.measure(yaml.compose(long_laughs(10_000, 1_000)))
    assert raised.value.problem_mark.line == 5  # the anchored phrase
    assert "characters" in str(raised.value)
    yaml_aliases.measure(yaml.compose(long_laughs(10_000, 9)))  # 90,000: inside the bound


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pyyaml"])
def test_a_policy_file_of_laughs_is_refused_at_its_anchor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, libyaml: bool
) -> None:
    if not libyaml:
        monkeypatch.setattr(loader, "_FAST_LOADER", None)
    root = directory(tmp_path, {"laughs.yaml": laughs(7)})  # before: 4 s, 290 MB, 2 other errors
    assert load_errors(root) == [("laughs.yaml", 7, 5, "yaml_aliases")]


def test_an_alias_inside_its_own_node_is_refused_where_it_is_anchored(tmp_path: Path) -> None:
    root = directory(tmp_path, {"loop.yaml": "id: loop\ntrigger: &t {phrase: [*t]}\n"})
    assert load_errors(root) == [("loop.yaml", 2, 10, "yaml_aliases")]


def test_shared_defaults_and_merge_keys_as_authors_write_them_still_load(tmp_path: Path) -> None:
    """300 policies of one file, each a merge of one anchored default with a shared rule:
    3,000 nodes repeated, far inside the bound."""
    base = (
        "- &defaults\n  id: base\n  title: shared defaults\n  owner: merch\n  priority: 10\n"
        "  trigger: {phrase: [base]}\n  rules: &rules [{category: {values: [Chocolate]}}]\n"
    )
    many = "".join(
        f"- <<: *defaults\n  id: p{n}\n  trigger: {{phrase: [word{n}]}}\n  rules: *rules\n"
        for n in range(300)
    )
    policy_set = load_policy_set(directory(tmp_path, {"shared.yaml": base + many}))
    assert len(policy_set.policies) == 301
    assert {(p.priority, p.title) for p in policy_set.policies} == {(10, "shared defaults")}


def test_a_long_string_aliased_many_times_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    """A 140 KB policy file standing for a billion characters: before, ``policy check`` ran
    past 1.5 GB (MemoryError writing the set's JSON); a 1.4 MB one stands for 100 GB. Run
    in a child limited to 1 GiB of address space and 120 s, so a regression fails here."""
    root = directory(tmp_path, {"long.yaml": long_laughs(100_000, 10_000)})
    done = bounded([sys.executable, "-m", "control_plane.cli", "policy", "check", str(root)])
    assert done.returncode == 3, done.stderr[-2000:]
    assert "long.yaml:6:12: yaml_aliases: aliases repeat" in done.stderr


def test_a_policy_test_file_of_laughs_is_refused(tmp_path: Path) -> None:
    cases = "cases:\n  - {name: laughs, intent: x, expect: {matched: *l6}}\n"
    text = laughs(7).split("\nid:")[0] + "\n" + cases
    root = directory(tmp_path, {"food/tests/laughs.yaml": text})
    with pytest.raises(SuiteLoadError) as raised:
        load_suite(root)
    assert [(e.file, e.line, e.code) for e in raised.value.errors] == [
        ("food/tests/laughs.yaml", 7, "yaml_aliases")
    ]


READERS: dict[str, tuple[Callable[[Path], Any], type[Exception]]] = {
    "config": (lambda path: load_settings(path, environ={}), yaml.YAMLError),
    "catalog profile": (load_profile, CatalogProfileError),
    "taxonomy": (load_taxonomy, CategoryRulesError),
    "supplement": (load_supplement, yaml.YAMLError),
    "personas": (load_personas, yaml.YAMLError),
    "demo purchases": (read_personas, yaml.YAMLError),
    "regression queries": (load_queries, QueryFileError),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_other_yaml_file_is_measured_before_it_is_built(tmp_path: Path, reader: str) -> None:
    read, refusal = READERS[reader]
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(9), encoding="utf-8")  # 387 million strings if anything walked them
    with pytest.raises(refusal) as raised:
        read(path)
    assert "aliases repeat" in str(raised.value)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_other_yaml_file_nested_too_deeply_is_its_readers_error(tmp_path: Path, reader: str) -> None:
    """PyYAML composes recursively: 3,000 nested lists were a RecursionError out of every
    reader (a traceback from the CLI), not the error each reports for a bad file."""
    read, refusal = READERS[reader]
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n", encoding="utf-8")
    with pytest.raises(refusal) as raised:
        read(path)
    assert "nested too deeply" in str(raised.value)


def test_a_json_query_file_nested_too_deeply_is_a_query_file_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(QueryFileError, match="nested too deeply"):
        load_queries(path)


def test_policy_check_answers_laughs_with_the_located_error_and_exit_3(tmp_path: Path) -> None:
    root = directory(tmp_path, {"laughs.yaml": laughs(10)})
    done = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", "policy", "check", str(root)],
        capture_output=True, text=True, timeout=120, env=checkout_env(),
    )
    assert done.returncode == 3, done.stderr
    assert "laughs.yaml:10:5: yaml_aliases: aliases repeat" in done.stderr
