"""``govsearch serve --workers N`` gives each worker a chain of its own: a configured
``audit.instance_id`` names one writer, so N > 1 workers under it are refused before anything
starts (their records would share sequences, and ``verify`` would find the chain broken)."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.cli import main


def test_several_workers_under_one_configured_writer_id_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no govsearch.yaml: the environment's settings only
    monkeypatch.setenv("GOVSEARCH_AUDIT_INSTANCE_ID", "shop-1")
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", "http://127.0.0.1:9")  # never reached
    assert main(["serve", "--workers", "2"]) == 2
    error = capsys.readouterr().err
    assert "audit.instance_id ('shop-1')" in error and "--workers 1" in error
    assert not (tmp_path / ".govsearch").exists()  # nothing started, no key or log made
