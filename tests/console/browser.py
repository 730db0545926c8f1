"""A real browser on the console: the app served by uvicorn on an ephemeral port of the
loopback, Debian's chromium driven through Debian's chromedriver (Selenium; nothing is
downloaded at run time). Screenshots go to ``$GOVSEARCH_CONSOLE_SHOTS`` (``docs/console/``
to refresh the documentation's), else to the test's temporary directory."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ["GOVSEARCH_CONSOLE_SHOTS"]) if os.environ.get("GOVSEARCH_CONSOLE_SHOTS") else None
"""where the browser test saves the console's screenshots (docs/console/ to refresh the
documentation's: ``GOVSEARCH_CONSOLE_SHOTS=docs/console make test-browser``); unset, it
takes them (the pages are rendered and captured) into the test's own temporary directory"""
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 60


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on 127.0.0.1:<free port>; its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the console server did not start")
            threading.Event().wait(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def browser() -> Any:
    """Headless chromium, 1400x1000. Without Debian's chromium the test fails, saying what
    to install (``.ci/run`` and ``make test-browser`` install it): never a silent skip."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("needs Debian's chromium and its driver: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update", "--lang=en-GB"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    return driver
