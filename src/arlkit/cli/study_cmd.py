"""``arlkit study``: RT's whole study of a base model and its RL model in one command.

Pass@(K,T) of both under the same budgets with paired differences, then below trajectory success at the
largest budget: matched-state step quality, quality by depth, error states and continuation, likelihood
(when both models can score continuations), the LLM judge (``--judge``) and action flows; ``summary.md``
and ``report.html`` lead with the takeaways for this pair. Every stage the environment or the models cannot
support is skipped with its reason. Re-run the same command to resume.

Exit codes: 0 when the study is written; 1 when evaluation trajectories ended by policy errors (re-run to
retry them); 2 for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arlkit.cli.eval_cmd import EVAL_FLAGS
from arlkit.cli.flags import add_flags, flag_overrides, nested
from arlkit.cli.progress import progress_reporter
from arlkit.config import ConfigError, load_config
from arlkit.recipes.eval import EngineStats, EvalConfig

__all__ = ["STUDY_EVAL_FLAGS", "register"]

STUDY_EVAL_FLAGS = tuple(flag for flag in EVAL_FLAGS if flag.field != "policies")
"""``arlkit eval``'s flags, setting ``StudyConfig.eval`` (the policies are ``--base`` and ``--rl``)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("study", help="RT's whole study of a base and an RL model, one command",
                              description=__doc__)
    p.add_argument("--base", required=True, metavar="SPEC", help="the base model: hf:PATH (or a model folder), "
                   "openai:MODEL@URL, or a scripted policy")
    p.add_argument("--rl", required=True, metavar="SPEC", help="the RL model, as --base")
    p.add_argument("--judge", default=None, metavar="SPEC", help="an LLM judge (any policy spec): checked against "
                   "the oracle where the environment has one, else it scores the step-level analyses")
    p.add_argument("--quick", action="store_true", help="a first look in minutes: smaller analysis pools and, unless "
                   "given, --tasks 20 --samples 4 --bootstrap 500")
    p.add_argument("--train-runs", nargs="+", default=[], metavar="RUN", help="`arlkit train` run folders whose "
                   "training dynamics join the report")
    p.add_argument("--out", required=True, help="study folder (re-run the same command to resume)")
    add_flags(p, EvalConfig, STUDY_EVAL_FLAGS)
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from arlkit.recipes.study import QUICK_EVAL, StudyConfig, run_study

    overrides = flag_overrides(args, nested("eval", STUDY_EVAL_FLAGS))
    if args.quick:
        for key, value in QUICK_EVAL.items():
            overrides.setdefault(f"eval.{key}", str(value))
    overrides.update({"base": args.base, "rl": args.rl, "quick": args.quick, "train_runs": tuple(args.train_runs)})
    if args.judge is not None:
        overrides["judge"] = args.judge
    try:
        config = load_config(StudyConfig, None, overrides, parse_values=False)
        stats = EngineStats()
        with progress_reporter("trajectories", stats=stats) as update:
            result = run_study(config, Path(args.out), on_progress=update, stats=stats,
                               say=lambda line: print(f"[study] {line}", flush=True))
    except ValueError as exc:  # bad budgets, too few tasks, the same model twice, ...
        raise ConfigError(str(exc)) from None
    print((result.out / "summary.md").read_text(encoding="utf-8"))
    print(f"the study is in {result.out}/: summary.md, report.html, eval/, analysis/")
    return 0
