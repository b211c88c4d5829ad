"""``arlkit eval``: Pass@(K,T) of policies on an environment's tasks.

The run is an ``EvalConfig``: give it as a YAML file (``--config``, e.g. configs/eval_frozenlake.yaml),
as flags, or both: a flag given overrides the file's key.

Exit codes: 0 when every trajectory finished; 1 when some ended by policy errors (re-run the same
command to retry them); 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arlkit.cli import UsageError
from arlkit.cli.flags import BACKEND_FLAGS, SAMPLING_FLAGS, Flag, add_flags, flag_overrides, nested
from arlkit.cli.progress import progress_reporter
from arlkit.config import ConfigError, load_config
from arlkit.recipes.eval import EngineStats, EvalConfig, check_eval_config, run_eval

__all__ = ["EVAL_FLAGS", "register"]

EVAL_FLAGS: tuple[Flag, ...] = (
    Flag("--env", "env.name", "environment"),
    Flag("--env-arg", "env.args", "environment option (repeatable)", kind="mapping", metavar="KEY=VALUE"),
    Flag("--policy", "policies", "policy spec, repeatable: random, oracle, noisy-oracle:EPS, hf:PATH, openai:MODEL@URL",
         kind="append", metavar="SPEC"),
    Flag("--tasks", "tasks", "number of tasks"),
    Flag("--samples", "samples", "trajectories per task (n)"),
    Flag("--budgets", "budgets", "turn budgets: percentages of T_max (25%%), turns (10) or full, comma-separated",
         kind="list"),
    Flag("--budget-mode", "prompt.budget_mode", "announced: one run per budget; hidden: one run at the largest"),
    Flag("--k", "ks", "K values, comma-separated (default: powers of two up to --samples)", kind="list"),
    Flag("--split", "split", "task split"),
    Flag("--seed", "seed", "base seed of every trajectory and of the bootstrap"),
    Flag("--history", "prompt.history", "show the first observation and only the last N (action, observation) "
         "pairs; 0: the current observation only; null: the full chat (default)", metavar="N"),
    Flag("--counters", "prompt.counters", "where announced budgets show the turn counters"),
    Flag("--prompt-profile", "prompt.profile", "rt: RT Table 2's system prompt; compact: a one-line budget "
         "statement before each observation, no system prompt (the embedded tiny model's)"),
    Flag("--tool-calls", "prompt.tool_calls", "text: actions written in the reply; native: the environment's "
         "functions offered as OpenAI tools and the model's tool calls taken as its actions (bfcl; openai: policies)"),
    Flag("--bootstrap", "bootstrap", "bootstrap resamples for CIs"),
    Flag("--max-active", "engine.max_active", "trajectories alive at once (memory bound)"),
    Flag("--max-concurrency", "engine.max_concurrency", "policy requests in flight at once (a batched "
         "policy's largest batch)"),
    Flag("--env-workers", "engine.env_workers", "environment steps in flight at once, for sandboxed "
         "environments (default: 4 per CPU core, at most 64)"),
    Flag("--batch-wait", "engine.batch_wait_s", "seconds a batched policy (hf, scripted) waits for more ready "
         "requests while environments still step"),
    Flag("--schedule", "engine.schedule", "async: each trajectory on its own; lockstep: one batch per turn, "
         "every trajectory waiting for the slowest (a baseline for benchmarks)"),
    Flag("--wandb", "wandb", "also log the Pass@(K,T) cells to this Weights & Biases project (the wandb extra)",
         metavar="PROJECT"),
    Flag("--allow-errors", "allow_errors", "compute Pass@(K,T) even while trajectories ended by policy errors "
         "remain, counting them as failures", kind="switch"),
    *nested("sampling", SAMPLING_FLAGS),
    *nested("backend", BACKEND_FLAGS),
)
"""Every flag of ``arlkit eval`` that sets an :class:`EvalConfig` field (``--config`` and ``--out`` aside)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="evaluate policies with Pass@(K,T)", description=__doc__)
    p.add_argument("--config", metavar="FILE.yaml", help="YAML serialisation of arlkit.recipes.eval.EvalConfig "
                   "(env: {name, args}, policies, budgets, prompt: {budget_mode, history, counters, profile}, ...); "
                   "flags override its keys")
    p.add_argument("--out", help="run directory (re-run the same command to resume); required unless listing")
    p.add_argument("--list-envs", action="store_true", help="list the environments, plugins included, with where "
                   "each comes from, and exit")
    p.add_argument("--list-policies", action="store_true", help="list the policy kinds, plugins included, with "
                   "where each comes from, and exit")
    add_flags(p, EvalConfig, EVAL_FLAGS)
    p.set_defaults(handler=_handle)


def eval_config_from_args(args: argparse.Namespace) -> EvalConfig:
    """The :class:`EvalConfig` of ``--config`` and the flags given (validated, environment included)."""
    return check_eval_config(load_config(EvalConfig, args.config, flag_overrides(args, EVAL_FLAGS), parse_values=False))


def _print_load_report(env: object) -> None:
    """What loading the environment's tasks from a folder did (``load_report``: the terminal
    environment's tasks loaded and folders skipped), before the run starts."""
    report = getattr(env, "load_report", None)
    if report is not None:
        for line in report.lines(limit=10):
            print(f"{getattr(env, 'name', 'env')}: {line}", flush=True)


def _print_sources(rows: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, source in rows:
        print(f"{name:<{width}}  {source}")


def _handle(args: argparse.Namespace) -> int:
    if args.list_envs or args.list_policies:
        from arlkit.recipes.catalog import environment_sources, policy_sources

        _print_sources(environment_sources() if args.list_envs else policy_sources())
        return 0
    if args.out is None:
        raise UsageError("the following arguments are required: --out")
    config = eval_config_from_args(args)
    try:
        stats = EngineStats()
        with progress_reporter("trajectories", stats=stats) as update:
            result = run_eval(config, Path(args.out), on_progress=update, stats=stats, on_start=_print_load_report)
    except ValueError as exc:  # bad budgets, too few tasks, ...
        raise ConfigError(str(exc)) from None
    print((Path(args.out) / "summary.md").read_text(encoding="utf-8"))
    if result.resumed:
        print(f"resumed: kept {result.resumed} finished trajectories")
    names = ("summary.md", "passkt.csv", "passkt.png", "trajectories.jsonl", "errors.jsonl")
    print(f"results in {args.out}/: {', '.join(n for n in names if (Path(args.out) / n).exists())}", file=sys.stdout)
    if result.errors:
        print(f"{result.errors} trajectories ended by policy errors; re-run to retry them", file=sys.stderr)
        return 1
    return 0
