"""Run logs: ``metrics.jsonl`` (one line per step), TensorBoard scalars and a progress bar.

TensorBoard's event format is written directly (length-prefixed records with masked CRC-32C, each an
``Event`` protocol buffer with a ``Summary`` of simple values), so neither TensorFlow nor the
``tensorboard`` package is needed to write; point ``tensorboard --logdir RUN_DIR/tb`` at a run to
read. :func:`read_tb_scalars` reads them back (tests, notebooks).
"""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arlkit.rundir import atomic_write_jsonl, read_complete_jsonl

__all__ = ["MetricsLog", "TBWriter", "progress_bar", "read_metrics", "read_tb_scalars"]


# -- CRC-32C (Castagnoli), as TFRecord framing requires ------------------------------------------------

def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- minimal protobuf encoding -------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, *, file_version: str | None = None, scalars: Mapping[str, float] = {}) -> bytes:
    out = _field(1, 1) + struct.pack("<d", wall_time) + _field(2, 0) + _varint(step)
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        summary = b"".join(
            _bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5) + struct.pack("<f", value))
            for tag, value in scalars.items()
        )
        out += _bytes_field(5, summary)
    return out


class TBWriter:
    """Appends scalar summaries to a TensorBoard event file in ``logdir``."""

    def __init__(self, logdir: str | Path) -> None:
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.arlkit"
        self.path = self.logdir / name
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed in close()
        self._write(_event(time.time(), 0, file_version="brain.Event:2"))

    def _write(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", _masked_crc(header)) + data + struct.pack("<I", _masked_crc(data)))
        self._file.flush()

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Write the finite numbers of ``values`` at ``step``."""
        clean = {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if clean:
            self._write(_event(time.time(), step, scalars=clean))

    def close(self) -> None:
        self._file.close()


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            value, pos = data[pos : pos + n], pos + n
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def read_tb_scalars(path: str | Path) -> list[tuple[int, str, float]]:
    """``(step, tag, value)`` of every scalar in one event file; raises ``ValueError`` on a bad CRC."""
    data = Path(path).read_bytes()
    pos, out = 0, []
    while pos + 12 <= len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if hcrc != _masked_crc(header):
            raise ValueError("corrupt event header")
        record = data[pos + 12 : pos + 12 + length]
        (dcrc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        if dcrc != _masked_crc(record):
            raise ValueError("corrupt event record")
        pos += 16 + length
        step = 0
        for number, _, value in _fields(record):
            if number == 2:
                step = value
            elif number == 5:
                for n, _, item in _fields(value):
                    if n != 1:
                        continue
                    tag, simple = "", None
                    for m, _, v in _fields(item):
                        if m == 1:
                            tag = v.decode()
                        elif m == 2:
                            simple = struct.unpack("<f", v)[0]
                    if simple is not None:
                        out.append((step, tag, simple))
    return out


# -- metrics.jsonl -------------------------------------------------------------------------------------

def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a ``metrics.jsonl`` (a half-written last line is ignored)."""
    return read_complete_jsonl(path)


class MetricsLog:
    """``metrics.jsonl`` plus optional TensorBoard scalars. On resume, lines of steps after the
    checkpoint (written before the interruption) are dropped so the log continues cleanly."""

    def __init__(self, run: Path, *, resume_step: int | None, tensorboard: bool) -> None:
        self.path = run / "metrics.jsonl"
        keep = [m for m in read_metrics(self.path) if resume_step is not None and int(m["step"]) <= resume_step]
        atomic_write_jsonl(self.path, keep)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self.tb = TBWriter(run / "tb") if tensorboard else None

    def log(self, step: int, values: Mapping[str, Any]) -> None:
        line = {"step": step, **values}
        self._file.write(json.dumps(line, sort_keys=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        if self.tb is not None:
            self.tb.scalars(step, {k: v for k, v in values.items() if isinstance(v, (int, float))})

    def close(self) -> None:
        self._file.close()
        if self.tb is not None:
            self.tb.close()


PLAIN_EVERY_SHARE = 0.1
"""Without a terminal, a progress line when another tenth of the work is done ..."""
PLAIN_EVERY_S = 30.0
"""... or when this many seconds passed since the last line and something moved."""

ProgressUpdate = Callable[..., None]
"""``update(done, info="")``: ``done`` units of ``total`` finished; ``info`` is a metrics mapping (its
reward, success, KL and loss are shown) or a ready string."""


@contextmanager
def progress_bar(total: int, start: int, enabled: bool, label: str = "train", *, unit: str = "step",
                 stream: Any = None) -> Iterator[ProgressUpdate]:
    """Yields ``update(done, info)`` (:data:`ProgressUpdate`): a rich bar (label, done/total, info,
    elapsed, ETA) on a terminal; otherwise (CI, logs) a plain line ``LABEL UNIT done/total info elapsed
    ETA`` when another :data:`PLAIN_EVERY_SHARE` of the work is done (so always at the end) or when
    ``done`` moved and :data:`PLAIN_EVERY_S` seconds passed since the last line; nothing when disabled.
    ``stream``: where it goes (default ``sys.stderr``)."""
    if not enabled:
        yield lambda done, info="": None
        return
    stream = stream if stream is not None else sys.stderr
    if stream.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=stream)) as bar:
            task = bar.add_task(label, total=total, completed=start, info="")

            def update(done: int, info: Mapping[str, Any] | str = "") -> None:
                bar.update(task, completed=done, info=_info(info))

            yield update
        return
    t0 = time.monotonic()

    def tenth(done: int) -> int:  # how many PLAIN_EVERY_SHARE of the work are done (1e-9: 3/10 is 0.3)
        return int(done / total / PLAIN_EVERY_SHARE + 1e-9) if total else 0

    last = {"share": float(tenth(start)), "at": t0, "done": float(start)}

    def update_plain(done: int, info: Mapping[str, Any] | str = "") -> None:
        now = time.monotonic()
        share, moved = tenth(done), done != last["done"]
        if not (share > last["share"] or (moved and now - last["at"] >= PLAIN_EVERY_S)):
            return
        last.update(share=share, at=now, done=done)
        elapsed, rate = now - t0, (done - start) / max(now - t0, 1e-9)
        eta = f"{(total - done) / rate:.0f}s" if done > start else "?"
        parts = (label, unit, f"{done}/{total}", _info(info), f"elapsed {elapsed:.0f}s", f"ETA {eta}")
        print(" ".join(x for x in parts if x), file=stream, flush=True)

    yield update_plain


def _info(info: Mapping[str, Any] | str) -> str:
    return info if isinstance(info, str) else _summary(info)


def _summary(metrics: Mapping[str, Any]) -> str:
    parts = []
    for key, label in (("reward/score_mean", "reward"), ("reward/success", "success"), ("actor/kl_loss", "KL"),
                       ("sft/loss", "loss")):
        if key in metrics and isinstance(metrics[key], (int, float)):
            parts.append(f"{label} {metrics[key]:.3f}")
    return " ".join(parts)
