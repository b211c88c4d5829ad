"""ARLArena's stability verdict and the collapse detector on synthetic metric series with a known answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from arlkit.analysis.stability import StabilityConfig, collapse_step, stability_verdict


def _rows(collapse_at: int | None, steps: int = 50, with_format: bool = True) -> list[dict[str, Any]]:
    rows = []
    for step in range(1, steps + 1):
        broken = collapse_at is not None and step >= collapse_at
        row: dict[str, Any] = {
            "step": step,
            "reward/success": (0.0 if step % 2 else 0.4) if broken else 0.5 + (0.02 if step % 2 else -0.02),
            "optim/grad_norm": 20.0 if broken else 1.0 + 0.01 * (step % 3),
            "actor/kl_loss": 0.5 if broken else 0.01,
            "actor/ppo_kl": 0.001,
        }
        if with_format:
            row["rollout/valid_format_tokens"] = 0.4 if collapse_at is not None and step >= collapse_at + 1 else 0.9
        rows.append(row)
    return rows


def test_a_steady_run_is_stable_and_does_not_collapse() -> None:
    verdict = stability_verdict("steady", _rows(None), trajectories_per_step=8)
    assert verdict.stable and verdict.collapse is None and verdict.final_steps == 10
    assert verdict.final_mean == pytest.approx(0.5) and verdict.final_var == pytest.approx(0.0004)
    assert verdict.noise_floor == pytest.approx((0.52 * 0.48 + 0.48 * 0.52) / 2 / 8)
    assert verdict.kl_key == "actor/kl_loss"  # the KL to the reference, when logged


def test_a_collapse_is_found_when_all_three_signals_have_fired() -> None:
    verdict = stability_verdict("broken", _rows(31))
    assert not verdict.stable and verdict.final_var == pytest.approx(0.04)  # 0.0 / 0.4 alternating
    assert verdict.collapse == 32  # grad norm and KL explode at 31, the format ratio drops at 32
    assert stability_verdict("no-format", _rows(31, with_format=False)).collapse == 31
    narrow = StabilityConfig(within=1)
    assert stability_verdict("x", _rows(31), config=narrow).collapse == 32  # all three hold at 32 itself


def test_the_detector_needs_history_and_every_signal() -> None:
    steps = list(range(1, 21))
    grad, kl, fmt = [1.0] * 20, [0.01] * 20, [0.9] * 20
    assert collapse_step(steps, grad, kl, fmt) is None
    early = [30.0] + grad[1:]
    assert collapse_step(steps, early, [5.0] + kl[1:], [0.1] + fmt[1:]) is None  # no baseline before step `window`
    spike = grad[:15] + [30.0] + grad[16:]
    assert collapse_step(steps, spike, kl, fmt) is None  # a gradient spike alone is not a collapse
    assert collapse_step(steps, spike, kl[:15] + [1.0] + kl[16:], fmt[:15] + [0.5] + fmt[16:]) == 16


def test_bad_settings_and_runs_without_success() -> None:
    with pytest.raises(ValueError, match="final_share"):
        StabilityConfig(final_share=0)
    with pytest.raises(ValueError, match="no success rate logged"):
        stability_verdict("empty", [{"step": 1, "optim/grad_norm": 1.0}])


def test_cli_writes_the_table_the_figures_and_a_report_section(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    for name, collapse in (("steady", None), ("broken", 31)):
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(collapse)))
        (run / "config.yaml").write_text("tasks_per_step: 2\ngroup_size: 4\n")
    out = tmp_path / "stability"
    proc = run_child([sys.executable, "-m", "arlkit", "analyze", "stability", str(tmp_path / "steady"),
                      str(tmp_path / "broken"), "--out", str(out)], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| steady | 50 | 50.0% | 0.0004 | 0.0312 | yes | none |" in proc.stdout
    assert "| broken | 50 | 20.0% | 0.0400 |" in proc.stdout and "| no | 32 |" in proc.stdout
    for name in ("stability.csv", "stability.json", "stability_dynamics.png", "stability_is_steady.png", "stability_is_broken.png"):
        assert (out / name).stat().st_size > 0, name
    from arlkit.report.html import write_html_report

    report = write_html_report([out], tmp_path / "report.html")
    assert "stability" in report.sections
    page = (tmp_path / "report.html").read_text()
    assert "Training stability (ARLArena)" in page and page.count("data:image/png;base64") == 3
    bad = run_child([sys.executable, "-m", "arlkit", "analyze", "stability", str(tmp_path), "--out", str(out)],
                    capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "no metrics.jsonl" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
