"""metrics.jsonl and the TensorBoard scalars (written with torch's SummaryWriter, read back with tensorboard's reader)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arlkit.train.tracking import MetricsLog, TBWriter, read_metrics, read_tb_scalars


def test_event_file_round_trip(tmp_path: Path) -> None:
    writer = TBWriter(tmp_path)
    writer.scalars(1, {"a": 0.5, "b": 2.0, "nan": float("nan"), "flag": True, "text": "x"})  # type: ignore[dict-item]
    writer.scalars(2, {"a": 0.25})
    writer.close()
    assert read_tb_scalars(tmp_path) == [(1, "a", 0.5), (1, "b", 2.0), (2, "a", 0.25)]


def test_metrics_log_resume_drops_later_steps(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path, resume_step=None, tensorboard=True)
    for step in range(1, 5):
        log.log(step, {"x": float(step)})
    log.close()
    with open(tmp_path / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 5, "x"')  # a line cut by a kill
    assert [m["step"] for m in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4]
    log = MetricsLog(tmp_path, resume_step=2, tensorboard=False)
    log.log(3, {"x": 30.0})
    log.close()
    assert [(m["step"], m["x"]) for m in read_metrics(tmp_path / "metrics.jsonl")] == [(1, 1.0), (2, 2.0), (3, 30.0)]
    assert [(step, tag) for step, tag, _ in read_tb_scalars(tmp_path / "tb")] == [(1, "x"), (2, "x"), (3, "x"), (4, "x")]


def test_progress_without_a_terminal_prints_sparse_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal (CI, logs): a line per tenth of the work, or after 30 s when something moved; the
    last step always shows."""
    import io

    from arlkit.train import tracking

    clock = [1000.0]
    monkeypatch.setattr(tracking.time, "monotonic", lambda: clock[0])
    stream = io.StringIO()  # isatty() is False
    with tracking.progress_bar(120, 0, True, "sft", stream=stream) as update:
        for step in range(1, 121):
            clock[0] += 0.5
            update(step, {"sft/loss": 1.0 / step})
    lines = stream.getvalue().splitlines()
    assert [line.split()[2] for line in lines] == [f"{12 * i}/120" for i in range(1, 11)]
    assert lines[0] == "sft step 12/120 loss 0.083 elapsed 6s ETA 54s"

    stream = io.StringIO()
    with tracking.progress_bar(1000, 10, True, "evaluation", unit="trajectories", stream=stream) as update:
        clock[0] += 31
        update(10, "0/12 evaluations")  # nothing moved: no line, however long it took
        update(11, "0/12 evaluations")  # moved, 31 s after the start: 989 left at 1/31 per second
        clock[0] += 5
        update(12, "0/12 evaluations")  # moved, but 5 s after the last line
        clock[0] += 30
        update(12, "1/12 evaluations")  # 35 s after the last line, and 12 was not shown yet
        update(13, "1/12 evaluations")  # 0 s after it
    assert stream.getvalue().splitlines() == [
        "evaluation trajectories 11/1000 0/12 evaluations elapsed 31s ETA 30659s",
        "evaluation trajectories 12/1000 1/12 evaluations elapsed 66s ETA 32604s",
    ]
    with tracking.progress_bar(3, 0, False) as update:
        update(1)
        update(2, "text")
