"""Plain-language readings of the step-level analyses of a base and an RL model, one line each, for the
summaries of ``arlkit demo`` and ``arlkit study``: the number with its 95% CI, then what it says.

Each reads the ``<kind>.json`` an analysis wrote (:mod:`arlkit.report.analysis_files`); an analysis that is
missing or was skipped gets a line saying so and why.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["analysis_readings", "depth_reading", "difference_reading", "estimate_text", "flows_reading",
           "judge_reading", "likelihood_reading", "read_analysis", "resolved"]


def read_analysis(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` when there is none."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def estimate_text(d: Mapping[str, float], scale: float = 1.0, digits: int = 3) -> str:
    """``value [low, high]`` of an estimate dictionary, times ``scale``."""
    return f"{scale * d['value']:.{digits}f} [{scale * d['low']:.{digits}f}, {scale * d['high']:.{digits}f}]"


def resolved(diff: Mapping[str, float]) -> bool:
    """The difference's 95% CI excludes 0."""
    return bool(diff["low"] > 0 or diff["high"] < 0)


def difference_reading(diff: Mapping[str, float], better: str, worse: str = "Base better") -> str:
    """What a difference's 95% CI says: ``better`` above 0, ``worse`` below, else unresolved."""
    if diff["low"] > 0:
        return f"{better} (CI above 0)"
    if diff["high"] < 0:
        return f"{worse} (CI below 0)"
    return "no resolvable difference (CI contains 0)"


def _absent(data: Mapping[str, Any] | None) -> str:
    if data is None:
        return "not run"
    return str(data.get("skipped") or "; ".join(data.get("notes") or []) or "no result")


def _quality_name(data: Mapping[str, Any]) -> str:
    if data.get("judge"):
        return f"judge score ({data['judge']})"
    return "oracle quality Q*" if str(data.get("quality", "")).startswith("Q*") else "quality"


def analysis_readings(folder: Path, *, rl: str = "Full", base: str = "Base", units: str = "maps",
                      source: str = "both models' T_max trajectories") -> list[str]:
    """One line each on ``rl`` vs ``base`` from ``folder/steps.json`` (matched-state step quality) and
    ``folder/errors.json`` (continuation success from injected error states)."""
    lines = []
    steps = read_analysis(folder / "steps.json")
    c = (steps or {}).get("comparison")
    if steps and c:
        lines.append(
            f"- Step quality at matched states ({c['n_states']} states over {c['n_tasks']} {units}, drawn equally from "
            f"{source}; {steps.get('actions')} actions per model per state): {rl}'s actions have mean "
            f"{_quality_name(steps)} {estimate_text(c['rl_mean'])} vs {base}'s {estimate_text(c['base_mean'])}, "
            f"{rl} - {base} {estimate_text(c['difference'])}: "
            f"{difference_reading(c['difference'], f'{rl} steps better', f'{base} better')}. {rl} is better at "
            f"{100 * c['share_rl_better']['value']:.0f}% of the states, {base} at {100 * c['share_base_better']['value']:.0f}%.")
    else:
        lines.append(f"- Step quality at matched states: not available ({_absent(steps)}).")
    errors = read_analysis(folder / "errors.json")
    cont = (errors or {}).get("continuation")
    if cont:
        lines.append(
            f"- Continuation from {cont['n_states']} error states (one harmful action injected into {source}, "
            f"{cont['samples']} continuations per model per state to the end of the budget): {rl} succeeds "
            f"{estimate_text(cont['rl'], 100, 1)}% vs {base}'s {estimate_text(cont['base'], 100, 1)}%, {rl} - {base} "
            f"{estimate_text(cont['difference'], 100, 1)} points: "
            f"{difference_reading(cont['difference'], f'{rl} recovers better', f'{base} better')}.")
    else:
        lines.append(f"- Continuation from error states: not available ({_absent(errors)}).")
    return lines


def depth_reading(folder: Path, *, rl: str = "RL", base: str = "Base") -> str:
    """The RL - base quality difference in the first and the last depth bin (``depth.json``)."""
    data = read_analysis(folder / "depth.json")
    bins = [b for b in (data or {}).get("bins") or [] if b.get("difference")]
    if not data or not bins:
        return f"- Quality by depth: not available ({_absent(data)})."
    first, last = bins[0], bins[-1]

    def at(b: Mapping[str, Any]) -> str:
        return f"t/T {b['low']:.2f}-{b['high']:.2f} ({b['n_states']} states): {estimate_text(b['difference'])}"

    if len(bins) == 1:
        return f"- Quality by depth, {rl} - {base}: every compared state in one bin, {at(first)}."
    gap = last["difference"]["value"] - first["difference"]["value"]
    if not (resolved(first["difference"]) or resolved(last["difference"])):
        trend = "neither is resolvable (both CIs contain 0), so no trend with depth can be read"
    else:
        trend = (f"{rl}'s advantage {'grows' if gap > 0 else 'shrinks'} with depth by {abs(gap):.3f} "
                 "(point estimates; read the CIs)")
    return f"- Quality by depth, {rl} - {base}: early {at(first)}, late {at(last)}; {trend}."


def likelihood_reading(folder: Path, *, rl: str = "RL", base: str = "Base") -> str:
    """ActionNLL under the base model of each model's actions, and the length-matched LLR difference."""
    data = read_analysis(folder / "likelihood.json")
    nll = (data or {}).get("action_nll") or {}
    if not data or data.get("skipped") or not nll:
        return f"- Likelihood: not available ({_absent(data)})."
    parts = [f"{who}'s actions {estimate_text(nll[side])}" for side, who in (("base", base), ("rl", rl)) if nll.get(side)]
    text = f"- Likelihood: ActionNLL under {base} (nats/token): " + ", ".join(parts)
    paired = data.get("paired_difference")
    if paired:
        text += (f"; over {data.get('pairs', 0)} length-matched pairs, LLR(log pi_{rl} - log pi_{base}) of {rl}'s "
                 f"trajectories minus {base}'s: {estimate_text(paired, digits=2)} nats: "
                 f"{difference_reading(paired, f'{rl} raises the likelihood of its own paths', f'{base} paths favoured')}")
    else:
        text += "; no length-matched pair of trajectories to compare whole paths (likelihood.md says why)"
    return text + "."


def judge_reading(folder: Path, judge: str | None = None) -> str:
    """The judge's rank agreement with the oracle (``judge.json``); ``judge`` names it (default: its recorded name)."""
    data = read_analysis(folder / "judge.json")
    if not data or data.get("skipped"):
        return f"- LLM judge vs oracle: not checked ({_absent(data)})."
    ci = data.get("spearman_ci")
    rho = estimate_text(ci, digits=2) if ci else f"{data['spearman_all']:.2f}"
    failures = data.get("failures", 0)
    return (f"- LLM judge {judge or data.get('judge', '')} vs the oracle over {data.get('actions', 0)} actions at "
            f"{data.get('states', 0)} states: Spearman {rho}; {failures} replies were not a score 0-10.")


def flows_reading(folder: Path, labels: Mapping[str, str]) -> str:
    """Each model's share of trajectories with a loop and of turns spent in loops (``flows.json``);
    ``labels`` maps a policy label of the run to its display name."""
    data = read_analysis(folder / "flows.json")
    loops = {row["group"]: row for row in (data or {}).get("loops") or []}
    parts = []
    for label, name in labels.items():
        row = loops.get(label)
        if row and not math.isnan(row["any_loop"]):
            parts.append(f"{name} {100 * row['any_loop']:.0f}% of {row['n']} trajectories loop, "
                         f"{100 * row['loop_turn_share']:.0f}% of turns in loops")
    if not parts:
        return f"- Action loops: not available ({_absent(data)})."
    return "- Action loops (a repeated action, an oscillation or a revisited state): " + "; ".join(parts) + "."
