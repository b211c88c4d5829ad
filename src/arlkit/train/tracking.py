"""Run logs: ``metrics.jsonl`` (one line per step), TensorBoard scalars and a progress bar.

TensorBoard events are written with ``torch.utils.tensorboard.SummaryWriter`` (the ``tensorboard``
package); point ``tensorboard --logdir RUN_DIR/tb`` at a run. :func:`read_tb_scalars` reads them back
with tensorboard's own event reader (tests, notebooks).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arlkit.extras import install_hint
from arlkit.rundir import atomic_write_jsonl, read_complete_jsonl

__all__ = ["MetricsLog", "TBWriter", "WandbRun", "progress_bar", "read_metrics", "read_tb_scalars"]


class TBWriter:
    """Scalars into a TensorBoard event file in ``logdir`` (``torch.utils.tensorboard``)."""

    def __init__(self, logdir: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = SummaryWriter(log_dir=str(self.logdir), flush_secs=30)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Write the finite numbers of ``values`` at ``step``."""
        wrote = False
        for key, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self._writer.add_scalar(key, float(value), global_step=step)
                wrote = True
        if wrote:
            self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbRun:
    """Weights & Biases logging of a run (``--wandb PROJECT``; the ``wandb`` extra), under the same
    metric names as ``metrics.jsonl``. The W&B run id is kept in ``RUN_DIR/wandb_id.txt``, so a resumed
    run continues the same W&B run; ``WANDB_MODE=offline`` writes it locally (``RUN_DIR/wandb/``)."""

    def __init__(self, project: str, run_dir: str | Path, *, name: str, config: Mapping[str, Any], job_type: str) -> None:
        from arlkit.config import ConfigError

        try:
            import wandb
        except ImportError:
            raise ConfigError(f"wandb: logging to W&B needs the wandb package: {install_hint('wandb')}") from None
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        id_file = run_dir / "wandb_id.txt"
        run_id = id_file.read_text(encoding="utf-8").strip() if id_file.exists() else uuid.uuid4().hex[:12]
        id_file.write_text(run_id + "\n", encoding="utf-8")
        # console off: W&B does not wrap stdout/stderr (progress bars, subprocess logs stay as they are)
        settings = wandb.Settings(console="off", x_disable_stats=True, save_code=False)
        self.run = wandb.init(project=project, name=name, id=run_id, resume="allow", dir=str(run_dir),
                              config=dict(config), job_type=job_type, settings=settings)  # fmt: skip

    def log(self, step: int, values: Mapping[str, Any]) -> None:
        """The finite numbers of ``values`` at ``step``."""
        clean = {k: float(v) for k, v in values.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}  # fmt: skip
        if clean:
            self.run.log(clean, step=step)

    def summary(self, values: Mapping[str, Any]) -> None:
        """Set run-level values (an evaluation's Pass@(K,T) cells)."""
        for key, value in values.items():
            self.run.summary[key] = value

    def finish(self) -> None:
        self.run.finish()


def read_tb_scalars(path: str | Path) -> list[tuple[int, str, float]]:
    """``(step, tag, value)`` of every scalar in an event file (or a folder of them), in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(path), size_guidance={"scalars": 0})
    events.Reload()
    out = [(e.step, tag, float(e.value)) for tag in events.Tags()["scalars"] for e in events.Scalars(tag)]
    return sorted(out, key=lambda x: (x[0], x[1]))


# -- metrics.jsonl -------------------------------------------------------------------------------------

def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a ``metrics.jsonl`` (a half-written last line is ignored)."""
    return read_complete_jsonl(path)


class MetricsLog:
    """``metrics.jsonl`` plus optional TensorBoard scalars. On resume, lines of steps after the
    checkpoint (written before the interruption) are dropped so the log continues cleanly."""

    def __init__(self, run: Path, *, resume_step: int | None, tensorboard: bool, wandb: WandbRun | None = None) -> None:
        self.path = run / "metrics.jsonl"
        self.wandb = wandb
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
        if self.wandb is not None:
            self.wandb.log(step, values)

    def close(self) -> None:
        self._file.close()
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


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
