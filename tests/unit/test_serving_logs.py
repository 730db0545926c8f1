"""``govsearch serve`` logs with lean records (``api.serving.lean_log_records``, ADR 0033):
the lines its logging configuration writes are the same; only fields no format of it shows
(the caller's file and line, thread, process) are left out of each record."""

from __future__ import annotations

import io
import logging
import logging.config

import pytest

from control_plane.api.serving import lean_log_records, log_config


def _lines(config: dict[str, object]) -> list[str]:
    """An access line and an error line through ``config``'s formatters, as written."""
    out: list[str] = []
    for formatter_name, logger_name, args in (
        ("access", "uvicorn.access",
         ('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5555", "POST", "/v1/search", "1.1", 200)),
        ("default", "uvicorn.error", ("Started server process [%d]", 42)),
    ):
        spec = dict(config["formatters"][formatter_name])  # type: ignore[index]
        factory = spec.pop("()", None)
        formatter = logging.Formatter(spec.get("fmt") or spec.get("format")) if factory is None else None
        if formatter is None:
            module, _, name = str(factory).rpartition(".")
            formatter = getattr(__import__(module, fromlist=[name]), name)(
                **{k: v for k, v in spec.items() if k in ("fmt", "use_colors")}
            )
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        logger = logging.getLogger(f"test-lean.{logger_name}")
        logger.handlers, logger.propagate, logger.level = [handler], False, logging.INFO
        logger.info(*args)
        out.append(stream.getvalue())
    return out


def test_lean_records_write_the_same_lines_without_caller_thread_or_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))  # restored after the test
    config = log_config()
    before = _lines(config)
    full = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
    lean_log_records()
    after = _lines(config)
    assert after == before and after[0].startswith('INFO:     127.0.0.1:5555 - "POST /v1/search')
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("test-lean.records")
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.handlers, logger.propagate, logger.level = [handler], False, logging.INFO
    logger.info("m")
    (record,) = records
    assert full.threadName is not None and full.process is not None
    assert record.threadName is None and record.process is None and record.processName is None
    assert (record.pathname, record.lineno) == ("(unknown file)", 0)
