"""metrics.jsonl and the dependency-free TensorBoard event writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from arlkit.train.tracking import MetricsLog, TBWriter, _crc32c, read_metrics, read_tb_scalars


def test_crc32c_known_value() -> None:
    # The CRC-32C check value of the ASCII string "123456789" is 0xE3069283 (RFC 3720, App. B.4).
    assert _crc32c(b"123456789") == 0xE3069283


def test_event_file_round_trip(tmp_path: Path) -> None:
    writer = TBWriter(tmp_path)
    writer.scalars(1, {"a": 0.5, "b": 2.0, "nan": float("nan")})
    writer.scalars(2, {"a": 0.25})
    writer.close()
    assert read_tb_scalars(writer.path) == [(1, "a", 0.5), (1, "b", 2.0), (2, "a", 0.25)]
    data = bytearray(writer.path.read_bytes())
    data[-3] ^= 0xFF
    writer.path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        read_tb_scalars(writer.path)


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
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
