"""``bench.http_layer`` reads the group commit from a server's ``/metrics`` text: the decision
log's batches, records and time, as a real recorder exposes them."""

from __future__ import annotations

import threading
from pathlib import Path

from bench.http_layer import _batched, batch_totals
from control_plane.audit.record import ErrorOut
from tests.audit.conftest import jsonl_recorder

ERROR = ErrorOut(code="engine_unavailable", message="down", status=503)


def test_the_decision_logs_batches_are_read_from_the_metrics_text(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path)
    before = batch_totals(recorder.metrics.render().decode())
    assert before == (0.0, 0.0, 0.0)
    requests = [threading.Thread(target=recorder.failure, args=(f"req-{n}", ERROR)) for n in range(12)]
    for request in requests:
        request.start()
    for request in requests:
        request.join()
    recorder.decisions.quiesce()
    after = batch_totals(recorder.metrics.render().decode())
    assert after is not None
    batches, records, seconds = after
    assert records == 12 and 1 <= batches <= 12 and seconds > 0
    phase = _batched(before, after)
    assert phase["batches"] == batches
    assert phase["records_per_batch"] == round(12 / batches, 2)
    recorder.close()


def test_a_server_without_the_batch_metrics_gives_none() -> None:
    older = '# HELP govsearch_audit_buffered_records x\n# TYPE govsearch_audit_buffered_records gauge\n' \
            'govsearch_audit_buffered_records 0.0\n'
    assert batch_totals(older) is None
