"""``arlkit analyze``: step-level diagnostics of base vs RL policies on recorded runs.

Sub-commands: ``steps`` (matched states), ``errors`` (error states, continuation, error
correction), ``depth`` (quality by t/T), ``likelihood`` (ActionNLL, cumulative LLR), ``judge``
(LLM judge vs oracle), ``flows`` (action transitions and loops) and ``stability`` (ARLArena's
stability verdict and collapse detector for training runs). Each writes CSV + PNG + markdown + JSON
into ``--out`` and prints the markdown summary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arlkit.cli import UsageError
from arlkit.cli.flags import add_sampling_arguments, sampling_from_args
from arlkit.config import ConfigError, build_config
from arlkit.recipes import analyze as api
from arlkit.recipes.analyze import ErrorsConfig, LikelihoodConfig, MissingCapability, StepsConfig

__all__ = ["register"]


def _common(p: argparse.ArgumentParser, *, pair: bool = True) -> None:
    p.add_argument("--runs", nargs="+", required=True, metavar="RUN",
                   help="run directories from `arlkit eval`" + (": BASE_RUN RL_RUN, or one run holding both policies" if pair else ""))  # fmt: skip
    p.add_argument("--out", required=True, help="output directory (CSV, PNG, markdown, JSON)")
    p.add_argument("--seed", type=int, default=0)
    if pair:
        p.add_argument("--base-label", default=None, help="the base policy's label in its run (default: its only policy, or --base)")
        p.add_argument("--rl-label", default=None, help="the RL policy's label in its run (default: its only policy, or --rl)")
        p.add_argument("--budget", type=int, default=None, help="use only trajectories run with this budget T")


def _judge_scorer(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", default=None, metavar="SPEC", help="an LLM judge (any policy spec) scoring the actions "
                   "where the environment has no step quality (SQL, BFCL, math, terminal)")


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("analyze", help="step-level diagnostics of base vs RL policies", description=__doc__)
    sub = parser.add_subparsers(dest="analysis", metavar="ANALYSIS", parser_class=type(parser))
    sub.required = True
    steps_defaults, errors_defaults, lik_defaults = StepsConfig(), ErrorsConfig(), LikelihoodConfig()

    p = sub.add_parser("steps", help="action quality at matched states (RT §3.3; docs/metrics.md)")
    p.add_argument("--base", required=True, help="base policy spec (samples the base actions)")
    p.add_argument("--rl", required=True, help="RL policy spec")
    p.add_argument("--states", type=int, default=steps_defaults.states, help="state pool size (half from each policy)")
    p.add_argument("--actions", type=int, default=steps_defaults.actions, help="G: next actions per policy per state")
    _judge_scorer(p)
    _common(p)
    _bootstrap(p)
    add_sampling_arguments(p)
    p.set_defaults(handler=_steps)

    p = sub.add_parser("depth", help="RL − base quality by normalised depth t/T (RT §3.3; docs/metrics.md)")
    p.add_argument("--steps", default=None, metavar="DIR", help="reuse steps.csv of an earlier `analyze steps` (no policies needed)")
    p.add_argument("--base", default=None, help="base policy spec (when not using --steps)")
    p.add_argument("--rl", default=None, help="RL policy spec (when not using --steps)")
    p.add_argument("--runs", nargs="*", default=[], metavar="RUN", help="run directories (when not using --steps)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bins", type=int, default=5, help="number of t/T bins")
    p.add_argument("--states", type=int, default=steps_defaults.states)
    p.add_argument("--actions", type=int, default=steps_defaults.actions)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--base-label", default=None)
    p.add_argument("--rl-label", default=None)
    p.add_argument("--budget", type=int, default=None)
    _judge_scorer(p)
    _bootstrap(p)
    add_sampling_arguments(p)
    p.set_defaults(handler=_depth)

    p = sub.add_parser("errors", help="error states, continuation success, error correction (RT App. B.5; docs/metrics.md)")
    p.add_argument("--base", required=True, help="base policy spec")
    p.add_argument("--rl", required=True, help="RL policy spec")
    p.add_argument("--states", type=int, default=errors_defaults.states, help="error states (half from each policy)")
    p.add_argument("--actions", type=int, default=errors_defaults.actions, help="G: next actions per policy per error state")
    p.add_argument("--continuations", type=int, default=errors_defaults.continuations, help="continuations per policy per error state")
    p.add_argument("--correction-states", type=int, default=errors_defaults.correction_states, help="failed-call prefixes")
    p.add_argument("--correction-actions", type=int, default=errors_defaults.correction_actions, help="next actions per prefix")
    _judge_scorer(p)
    _common(p)
    _bootstrap(p)
    add_sampling_arguments(p)
    p.set_defaults(handler=_errors)

    p = sub.add_parser("likelihood", help="ActionNLL, cumulative LLR, length-matched pairs (RT §4.1; docs/metrics.md)")
    p.add_argument("--base", required=True, metavar="MODEL", help="base scoring model: hf:PATH (a bare PATH means hf:PATH) or openai:MODEL@URL (a vLLM, SGLang "
                   "or arlkit serve server that returns prompt log-probs; docs/policies.md)")
    p.add_argument("--rl", required=True, metavar="MODEL", help="RL scoring model")
    p.add_argument("--max-trajectories", type=int, default=lik_defaults.max_trajectories, help="most trajectories scored per policy")
    p.add_argument("--tolerance", type=float, default=lik_defaults.length_tolerance, help="length matching: max token difference share")
    p.add_argument("--all-trajectories", action="store_true", help="LLR curves and pairs over all trajectories, not only successful ones")
    p.add_argument("--batch-size", type=int, default=lik_defaults.batch_size, help="continuations per scoring call")
    _common(p)
    _bootstrap(p)
    p.set_defaults(handler=_likelihood)

    p = sub.add_parser("judge", help="LLM judge vs oracle rank agreement (RT §5.1; docs/metrics.md)")
    p.add_argument("--judge", required=True, help="judge policy spec (any backend)")
    p.add_argument("--states", type=int, default=100, help="state pool size (equal from each policy of the runs)")
    p.add_argument("--history-turns", type=int, default=None, help="show the judge only the last N turns")
    p.add_argument("--candidates", default=None, metavar="SPEC",
                   help="policy proposing the judged actions (default: every admissible action; required without a finite action set)")
    p.add_argument("--actions", type=int, default=4, help="actions proposed per state by --candidates")
    _common(p, pair=False)
    _bootstrap(p)
    add_sampling_arguments(p)
    p.set_defaults(handler=_judge)

    p = sub.add_parser("flows", help="action-transition Sankey diagrams and loop metrics (ARLArena App. F)")
    p.add_argument("--max-steps", type=int, default=12, help="steps (columns) drawn")
    p.add_argument("--repeat-k", type=int, default=3, help="a repeat loop is the same action this many times in a row")
    p.add_argument("--oscillation-len", type=int, default=4, help="an oscillation is A B A B ... over this many turns")
    p.add_argument("--runs", nargs="+", required=True, metavar="RUN", help="run directories")
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(handler=_flows)

    p = sub.add_parser("stability", help="stable or collapsed: training runs judged as ARLArena does (docs/arena.md)")
    p.add_argument("runs", nargs="+", metavar="RUN", help="`arlkit train` run directories")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--threshold", type=float, default=0.01, help="stable when the final success variance is below this")
    p.add_argument("--final-share", type=float, default=0.2, help="share of final steps the variance is taken over")
    p.add_argument("--window", type=int, default=10, help="collapse detector: steps of the baseline median")
    p.add_argument("--explode", type=float, default=5.0, help="collapse detector: grad norm and KL above this x baseline")
    p.add_argument("--format-drop", type=float, default=0.2, help="collapse detector: valid-format ratio drop")
    p.add_argument("--within", type=int, default=3, help="collapse detector: the three events within this many steps")
    p.set_defaults(handler=_stability)


def _run(kind: str, out: str, call: Callable[[], Any]) -> int:
    try:
        with api.analysis_run(out):
            call()
    except MissingCapability as exc:
        print(f"arlkit analyze {kind}: skipped: {exc}", file=sys.stderr)
        print(f"(recorded in {out}/{kind}.md)")
        return 0
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise UsageError(str(exc)) from None
    summary = Path(out) / f"{kind}.md"
    if summary.exists():
        print(summary.read_text(encoding="utf-8"))
    print(f"results in {out}/")
    return 0


def _steps(args: argparse.Namespace) -> int:
    config = build_config(StepsConfig, {"states": args.states, "actions": args.actions, "seed": args.seed,
                                        "bootstrap": args.bootstrap}, where="steps")  # fmt: skip
    return _run("steps", args.out, lambda: api.analyze_steps(
        args.runs, args.base, args.rl, out=args.out, config=config, base_label=args.base_label, rl_label=args.rl_label,
        budget=args.budget, sampling=sampling_from_args(args), judge=args.judge))  # fmt: skip


def _depth(args: argparse.Namespace) -> int:
    if args.steps is None and not (args.base and args.rl and args.runs):
        raise UsageError("give --steps DIR (an earlier `arlkit analyze steps` output) or --base, --rl and --runs")
    config = build_config(StepsConfig, {"states": args.states, "actions": args.actions, "seed": args.seed,
                                        "bootstrap": args.bootstrap}, where="depth")  # fmt: skip
    if args.bins < 1:
        raise UsageError(f"--bins must be >= 1, got {args.bins}")
    return _run("depth", args.out, lambda: api.analyze_depth(
        args.runs, args.base, args.rl, out=args.out, steps_dir=args.steps, bins=args.bins, config=config,
        base_label=args.base_label, rl_label=args.rl_label, budget=args.budget, sampling=sampling_from_args(args),
        judge=args.judge))  # fmt: skip


def _errors(args: argparse.Namespace) -> int:
    config = build_config(ErrorsConfig, {
        "states": args.states, "actions": args.actions, "continuations": args.continuations,
        "correction_states": args.correction_states, "correction_actions": args.correction_actions,
        "seed": args.seed, "bootstrap": args.bootstrap}, where="errors")  # fmt: skip
    return _run("errors", args.out, lambda: api.analyze_errors(
        args.runs, args.base, args.rl, out=args.out, config=config, base_label=args.base_label, rl_label=args.rl_label,
        budget=args.budget, sampling=sampling_from_args(args), judge=args.judge))  # fmt: skip


def _likelihood(args: argparse.Namespace) -> int:
    config = build_config(LikelihoodConfig, {
        "max_trajectories": args.max_trajectories, "length_tolerance": args.tolerance,
        "successful_only": not args.all_trajectories, "seed": args.seed, "bootstrap": args.bootstrap,
        "batch_size": args.batch_size}, where="likelihood")  # fmt: skip
    return _run("likelihood", args.out, lambda: api.analyze_likelihood(
        args.runs, args.base, args.rl, out=args.out, config=config, base_label=args.base_label, rl_label=args.rl_label,
        budget=args.budget))  # fmt: skip


def _judge(args: argparse.Namespace) -> int:
    if args.states < 1 or args.actions < 1:
        raise UsageError(f"--states and --actions must be >= 1, got {args.states} and {args.actions}")
    return _run("judge", args.out, lambda: api.analyze_judge(
        args.runs, args.judge, out=args.out, states=args.states, seed=args.seed, bootstrap=args.bootstrap,
        max_history_turns=args.history_turns, candidates=args.candidates, actions=args.actions,
        sampling=sampling_from_args(args)))  # fmt: skip


def _flows(args: argparse.Namespace) -> int:
    if args.max_steps < 1 or args.repeat_k < 2 or args.oscillation_len < 3:
        raise UsageError("need --max-steps >= 1, --repeat-k >= 2 and --oscillation-len >= 3")
    return _run("flows", args.out, lambda: api.analyze_flows(
        args.runs, out=args.out, max_steps=args.max_steps, repeat_k=args.repeat_k, oscillation_len=args.oscillation_len))  # fmt: skip


def _stability(args: argparse.Namespace) -> int:
    from arlkit.recipes.stability import StabilityConfig, analyze_stability

    config = build_config(StabilityConfig, {"threshold": args.threshold, "final_share": args.final_share,
                                            "window": args.window, "explode": args.explode,
                                            "format_drop": args.format_drop, "within": args.within}, where="stability")  # fmt: skip
    return _run("stability", args.out, lambda: analyze_stability(args.runs, out=args.out, config=config))
