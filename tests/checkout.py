"""The checkout under test, for the child processes tests start.

The virtual environment holds an editable install of *one* checkout, whose import finder
comes after ``sys.path``. A child that does not find this checkout's packages on its path
imports that one's: a ``govsearch`` console script always (its path starts at the
virtual environment's ``bin``), and ``python -c`` or ``python -m`` run from another
directory. In a git worktree that is the main checkout's code, not the code under test.
Every child that runs govsearch code is started with :func:`checkout_env`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""the checkout these tests belong to"""


def checkout_env(base: Mapping[str, str] | None = None, /, **env: str) -> dict[str, str]:
    """The environment of a child that runs this checkout's code: ``base`` (default: this
    process's environment) with :data:`ROOT` first on ``PYTHONPATH`` (a ``PYTHONPATH`` it
    had is kept after it), then ``env``."""
    base = os.environ if base is None else base
    path = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, **env}
