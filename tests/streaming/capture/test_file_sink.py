"""A file sink cut back at recovery stores the file's real length, even when the next batch holds no line."""

from __future__ import annotations

from streaming.capture.sinks import FileSink
from streaming.capture.state import CaptureState


def test_a_batch_without_lines_after_a_cut_back_stores_the_files_length(tmp_path):
    out, state_path = tmp_path / "ops.ndjson", tmp_path / "state.sqlite"
    state = CaptureState(state_path)
    sink = FileSink(out, state)
    sink.recover()
    sink.stage([b'{"a":1}'])
    sink.seal(phase="streaming", lsn=1)
    sink.stage([b'{"b":2}'])  # written, never sealed: a kill here
    sink._out.flush()
    sink.close()
    state.close()

    state = CaptureState(state_path)
    sink = FileSink(out, state)
    sink.recover()  # cuts the unsealed batch off
    sink.seal(lsn=2)  # a transaction with no published change: nothing staged
    assert state.position().sink_bytes == out.stat().st_size == len(b'{"a":1}\n')
    sink.close()
    state.close()
