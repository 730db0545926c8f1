"""Running a risky call in a child process that cannot take the machine down: its address
space and CPU time are limited (``resource.setrlimit``) and it is killed after a timeout, so
a regression fails the test (a MemoryError, a non-zero exit, a timeout) instead of CI."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

from tests.checkout import checkout_env

MEMORY_BYTES = 1 << 30
"""the child's address space: 1 GiB (the interpreter and the project need about 300 MB)"""
TIMEOUT_S = 120


def _limits(memory: int, seconds: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def bounded(
    command: Sequence[str], *, memory: int = MEMORY_BYTES, timeout: int = TIMEOUT_S, input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``command`` run to completion under the limits (``subprocess.TimeoutExpired`` past
    ``timeout``: the child is killed first), in ``env`` (default: :func:`checkout_env`, so
    ``python -m control_plane...`` runs this checkout's code wherever pytest runs from)."""
    return subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, input=input,
        env=checkout_env() if env is None else dict(env),
        preexec_fn=lambda: _limits(memory, timeout),
    )
