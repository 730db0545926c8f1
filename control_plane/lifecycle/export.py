"""Write a policy set (and its test suite) back to a policy directory: GitOps in reverse.

Each policy goes to the file it was applied from when known (several policies of one file
become one multi-document file), else to ``<id>.yaml``; vocabularies to
``vocabularies/<name>.yaml``; the governance to ``governance.yaml``; test cases to the test
files they came from. :func:`control_plane.loader.load_policy_set` reads the directory
back to the same version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from control_plane.lifecycle.suite import Suite
from control_plane.loader import dump_policy_yaml
from control_plane.policy import PolicySet

HEADER = "# Exported by govsearch from policy-set version {version}.\n"


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=88)


def export_policy_set(
    policy_set: PolicySet,
    directory: Path | str,
    *,
    suite: Suite | None = None,
    files: Mapping[str, str] | None = None,
) -> list[Path]:
    """Write the directory; return the files written. Refuses a non-empty directory."""
    root = Path(directory)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty: export into a new directory")
    header = HEADER.format(version=policy_set.version)
    grouped: dict[str, list[str]] = defaultdict(list)
    reserved = {"governance.yaml"} | set(suite.files() if suite is not None else ())
    for policy in policy_set.policies:
        name = (files or {}).get(policy.id) or f"{policy.id}.yaml"
        if name in reserved or name.startswith("vocabularies/"):
            name = f"policies/{policy.id}.yaml"  # e.g. a policy whose id is "governance"
        grouped[name].append(dump_policy_yaml(policy))
    outputs: dict[str, str] = {
        name: header + "---\n".join(documents) for name, documents in grouped.items()
    }
    governance = policy_set.governance.model_dump(mode="json", by_alias=True)
    outputs["governance.yaml"] = header + _dump(governance)
    for vocabulary in policy_set.vocabularies:
        data = vocabulary.model_dump(mode="json", by_alias=True, exclude={"name"})
        data["entries"] = {value: list(words) for value, words in vocabulary.entries.items()}
        outputs[f"vocabularies/{vocabulary.name}.yaml"] = header + _dump(data)
    if suite is not None:
        for name, cases in suite.files().items():
            outputs[name] = header + _dump(cases)
    written = []
    for name, text in sorted(outputs.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
