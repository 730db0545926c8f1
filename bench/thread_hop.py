"""What one hop into the API's thread pool costs (``python -m bench.thread_hop``): the most an
async engine client could save per request, since a request makes one hop for all its
synchronous work (``run_in_threadpool``); printed with the load average."""

import os
import time

import anyio
from starlette.concurrency import run_in_threadpool


def f() -> int:
    return 1


async def main() -> None:
    n = 3000
    for _ in range(200):
        await run_in_threadpool(f)
    t = time.perf_counter()
    for _ in range(n):
        await run_in_threadpool(f)
    hop = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for _ in range(n):
        f()
        await anyio.sleep(0)
    base = (time.perf_counter() - t) / n * 1e6
    print(f"thread hop {hop:.1f} us, no hop {base:.1f} us; load average {os.getloadavg()}")


if __name__ == "__main__":
    anyio.run(main)
