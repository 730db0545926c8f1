"""Listing a policy directory: ``loader.yaml_files`` finds what ``rglob`` and ``is_file`` find.

The loader and the suite list a directory with one ``os.scandir`` per folder (no ``stat``
and no ``relative_to`` per file: seconds at 100,000 files). The reference is the listing
they did before, ``root.rglob("*")`` filtered the same way, on a tree with every case the
filters care about: dot folders and files, ``tests/`` and ``vocabularies/`` folders at any
depth, ``.yml``, other suffixes, symlinked files and folders, a dangling link.
"""

from __future__ import annotations

from pathlib import Path

from control_plane.lifecycle.suite import case_files
from control_plane.loader import SUFFIXES, YamlReading, yaml_files


def _reference(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if path.suffix in SUFFIXES and path.is_file() and not any(p.startswith(".") for p in parts):
            found.append(path.relative_to(root).as_posix())
    return sorted(found)


def _tree(root: Path) -> None:
    files = [
        "governance.yaml", "a.yaml", "b.yml", "c.YAML", "d.json", ".hidden.yaml", "z/e.yaml",
        "z/y/f.yaml", "z/.g.yaml", ".dot/h.yaml", "z/.dot/i.yaml", "tests/t.yaml",
        "z/tests/u.yaml", "tests/deeper/v.yaml", "vocabularies/w.yaml", "z/vocabularies/x.yaml",
        "a b/é.yaml", "aa.yaml", "a-a.yaml", "a/a.yaml",
    ]  # fmt: skip
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("id: x\n", encoding="utf-8")
    (root / "linked.yaml").symlink_to(root / "a.yaml")
    (root / "linked-folder").symlink_to(root / "z", target_is_directory=True)
    (root / "dangling.yaml").symlink_to(root / "missing.yaml")
    (root / "folder.yaml").mkdir()


def test_the_listing_is_rglob_s(tmp_path: Path) -> None:
    _tree(tmp_path)
    listed = yaml_files(tmp_path)
    assert [relative for relative, _ in listed] == _reference(tmp_path)
    assert all(path == tmp_path / relative for relative, path in listed)
    assert "linked.yaml" in dict(listed) and "dangling.yaml" not in dict(listed)


def test_policy_and_case_files_keep_their_filters(tmp_path: Path) -> None:
    _tree(tmp_path)
    reference = _reference(tmp_path)
    policies = [p.relative_to(tmp_path).as_posix() for p in YamlReading(tmp_path).policy_files()]
    assert policies == [
        r for r in reference
        if "tests" not in r.split("/")[:-1] and r.split("/")[0] != "vocabularies" and r != "governance.yaml"
    ]  # fmt: skip
    cases = [p.relative_to(tmp_path).as_posix() for p in case_files(tmp_path)]
    assert cases == [r for r in reference if "tests" in r.split("/")[:-1]]
    assert "z/vocabularies/x.yaml" in policies and "tests/deeper/v.yaml" in cases


def test_locations_from_the_load_are_policy_locations(tmp_path: Path) -> None:
    """``load_policy_set(locations=)`` (lint's one read) gives what a second read gave."""
    from control_plane.loader import load_policy_set, policy_locations

    demo = Path(__file__).resolve().parents[2] / "policies"
    located: dict[str, str] = {}
    policy_set = load_policy_set(demo, locations=located)
    assert located == policy_locations(demo)
    assert set(located) == {p.id for p in policy_set.policies}
    listed = tmp_path / "listed"  # several policies in one file, as a list and as documents
    listed.mkdir()
    (listed / "governance.yaml").write_text((demo / "governance.yaml").read_text(encoding="utf-8"))
    (listed / "two.yaml").write_text(
        "- id: first\n  title: one\n  owner: merch\n  trigger: {phrase: [tea]}\n"
        "  rules: [{boost: {field: brand, values: [x], weight: 2}}]\n"
        "- id: second\n  title: two\n  owner: merch\n  trigger: {phrase: [coffee]}\n"
        "  rules: [{boost: {field: brand, values: [y], weight: 2}}]\n",
        encoding="utf-8",
    )
    (listed / "docs.yaml").write_text(
        "id: third\ntitle: three\nowner: merch\ntrigger: {phrase: [milk]}\n"
        "rules: [{boost: {field: brand, values: [z], weight: 2}}]\n---\n"
        "\n\nid: fourth\ntitle: four\nowner: merch\ntrigger: {phrase: [bread]}\n"
        "rules: [{boost: {field: brand, values: [w], weight: 2}}]\n",
        encoding="utf-8",
    )
    located = {}
    load_policy_set(listed, locations=located)
    assert located == policy_locations(listed)
    assert located == {
        "first": "two.yaml:1", "second": "two.yaml:6", "third": "docs.yaml:1", "fourth": "docs.yaml:9",
    }  # fmt: skip


def test_a_directory_read_once_gives_the_files_a_second_read_gave(tmp_path: Path) -> None:
    """``publish`` and ``apply`` keep each policy's file from the one read of the set."""
    from control_plane.bootstrap import profile_of
    from control_plane.config import Settings
    from control_plane.lifecycle.workflow import read_directory
    from control_plane.loader import policy_locations

    demo = Path(__file__).resolve().parents[2] / "policies"
    policy_set, files = read_directory(demo, profile_of(Settings()))
    assert files == {pid: where.rsplit(":", 1)[0] for pid, where in policy_locations(demo).items()}
    assert set(files) == {p.id for p in policy_set.policies} and len(files) > 10


def test_a_load_reports_its_progress_in_bounded_steps(tmp_path: Path) -> None:
    from control_plane.loader import PROGRESS_STEPS, load_policy_set

    demo = Path(__file__).resolve().parents[2] / "policies"
    (tmp_path / "governance.yaml").write_text((demo / "governance.yaml").read_text(encoding="utf-8"))
    count = PROGRESS_STEPS * 2 + 7
    for number in range(count):
        (tmp_path / f"p{number:04d}.yaml").write_text(
            f"id: p{number}\ntitle: t\nowner: merch\ntrigger: {{phrase: [word{number}]}}\n"
            "rules: [{boost: {field: brand, values: [x], weight: 2}}]\n",
            encoding="utf-8",
        )
    reported: list[tuple[int, int]] = []
    policy_set = load_policy_set(tmp_path, progress=lambda done, total: reported.append((done, total)))
    assert len(policy_set.policies) == count
    assert reported[-1] == (count, count)
    assert all(total == count for _, total in reported)
    done = [d for d, _ in reported]
    assert done == sorted(set(done)) and len(reported) <= PROGRESS_STEPS + 1
