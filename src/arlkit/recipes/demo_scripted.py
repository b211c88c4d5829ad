"""``arlkit demo --scripted``: no model; a Pass@(K,T) evaluation of scripted policies of known quality
(oracle, a noisy oracle, random) on the demo's maps, the step-level diagnostics of the noisy vs the
exact oracle, and one HTML report (about a minute).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from arlkit.config import EnvSpec
from arlkit.recipes.analyze import analyze_run
from arlkit.recipes.demo_plan import DEMO_ENV
from arlkit.recipes.eval import EngineStats, EvalConfig, EvalResult, run_eval
from arlkit.report.html import write_html_report
from arlkit.rundir import holds_run_dir

__all__ = ["SCRIPTED_POLICIES", "run_scripted_demo"]

SCRIPTED_POLICIES = ("oracle", "noisy-oracle:0.3", "random")


@holds_run_dir("out")
def run_scripted_demo(
    out: str | Path, *, quick: bool = False, on_progress: Callable[[int, int], None] | None = None,
    stats: EngineStats | None = None,
) -> tuple[EvalResult, list[str], Path]:
    """Evaluate the scripted policies into ``out/eval``, analyse noisy-oracle vs oracle into
    ``out/analysis`` and write ``out/report.html``. Returns the evaluation, the analyses' notes and
    the report's path. ``on_progress`` and ``stats`` follow the evaluation (:func:`run_eval`)."""
    out = Path(out)
    config = EvalConfig(
        env=EnvSpec("frozenlake", dict(DEMO_ENV)),
        policies=SCRIPTED_POLICIES,
        tasks=30 if quick else 100,
        samples=8,
        budgets=("25%", "50%", "75%", "100%"),
    )
    result = run_eval(config, out / "eval", on_progress=on_progress, stats=stats)
    notes = analyze_run([out / "eval"], "noisy-oracle:0.3", "oracle", out / "analysis", quick=quick,
                        base_label="noisy-oracle:0.3", rl_label="oracle")  # fmt: skip
    report = out / "report.html"
    write_html_report([out], report, title="arlkit demo")
    return result, notes, report
