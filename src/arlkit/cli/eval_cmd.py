"""``arlkit eval``: Pass@(K,T) of policies on an environment's tasks.

Exit codes: 0 when every trajectory finished; 1 when some ended by policy errors (re-run the same
command to retry them); 2 for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TypeVar

from arlkit.cli.progress import progress_reporter
from arlkit.config import ConfigError, build_config, parse_key_values
from arlkit.envs import env_config, list_envs
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.policies import BackendOptions, SamplingConfig

C = TypeVar("C")

__all__ = ["register"]


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """The sampling options shared by every command that runs an LLM policy."""
    defaults = SamplingConfig()
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="sampling temperature (0 = greedy)")
    parser.add_argument("--top-p", type=float, default=defaults.top_p, help="nucleus sampling mass")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="top-k sampling (0 = off)")
    parser.add_argument(
        "--max-new-tokens", type=int, default=defaults.max_new_tokens,
        help="cap on tokens per reply (default: the model's generation config, 32 for the embedded tiny model; else 256)",
    )


def _config_from_args(cls: type[C], args: argparse.Namespace, where: str) -> C:
    """An instance of the dataclass ``cls`` from the parsed options named like its fields (validated);
    a field without an option is an error here, so the flags cannot drift from the config."""
    return build_config(cls, {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}, where=where)  # type: ignore[arg-type]


def sampling_from_args(args: argparse.Namespace) -> SamplingConfig:
    """The :class:`SamplingConfig` of parsed sampling options (validated)."""
    return _config_from_args(SamplingConfig, args, "sampling")


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Timeouts, retries and the context window of LLM backends (scripted policies ignore them)."""
    parser.add_argument("--request-timeout", type=float, default=None, metavar="SECONDS", help="openai: seconds one HTTP attempt may take (default 60)")
    parser.add_argument("--max-retries", type=int, default=None, help="openai: further attempts after a 429, 5xx, timeout, dropped connection or malformed reply (default 4)")
    parser.add_argument("--retry-backoff", type=float, default=None, metavar="SECONDS", help="openai: seconds before the first retry, doubled each time (default 0.5)")
    parser.add_argument("--context-length", type=int, default=None, metavar="TOKENS", help="context window (prompt + reply); hf: at most the model's own (default); openai: the server's, when known")


def backend_from_args(args: argparse.Namespace) -> BackendOptions:
    """The :class:`BackendOptions` of parsed backend options (validated)."""
    return _config_from_args(BackendOptions, args, "backend")


def register(subparsers: argparse._SubParsersAction) -> None:
    defaults = EvalConfig()
    p = subparsers.add_parser("eval", help="evaluate policies with Pass@(K,T)", description=__doc__)
    p.add_argument("--env", default=defaults.env, help=f"environment (default {defaults.env})")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE", help="environment option (repeatable)")
    p.add_argument("--policy", action="append", metavar="SPEC", help="policy spec, repeatable: random, oracle, noisy-oracle:EPS, hf:PATH, openai:MODEL@URL")
    p.add_argument("--tasks", type=int, default=defaults.tasks, help="number of tasks")
    p.add_argument("--samples", type=int, default=defaults.samples, help="trajectories per task (n)")
    p.add_argument("--budgets", default=",".join(defaults.budgets), help="turn budgets: percentages of T_max (25%%) or turns (10), comma-separated")
    p.add_argument("--budget-mode", choices=["announced", "hidden"], default=defaults.budget_mode)
    p.add_argument("--k", type=_int_list, default=None, help="K values, comma-separated (default: powers of two up to --samples)")
    p.add_argument("--split", choices=["train", "test"], default=defaults.split)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--history", type=int, default=None, help="show the first observation and only the last N (action, observation) pairs; 0: the current observation only")
    p.add_argument("--counters", choices=["system", "observation"], default=defaults.counters, help="where announced budgets show the turn counters")
    p.add_argument("--bootstrap", type=int, default=defaults.bootstrap, help="bootstrap resamples for CIs")
    p.add_argument("--max-active", type=int, default=defaults.max_active, help="trajectories in flight at once")
    p.add_argument("--out", required=True, help="run directory (re-run the same command to resume)")
    p.add_argument("--allow-errors", action="store_true", help="compute Pass@(K,T) even while trajectories ended by policy errors remain, counting them as failures")
    add_sampling_arguments(p)
    add_backend_arguments(p)
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if args.env not in list_envs():
        raise ConfigError(f"unknown environment {args.env!r}; valid choices: {', '.join(list_envs())}")
    env_args = parse_key_values(args.env_arg, option="--env-arg")
    env_config(args.env, env_args)  # validate names and types before any work
    config = build_config(
        EvalConfig,
        {
            "env": args.env,
            "env_args": {k: v for k, v in config_items(args.env, env_args).items()},
            "policies": tuple(args.policy or ["oracle"]),
            "tasks": args.tasks,
            "samples": args.samples,
            "budgets": tuple(b.strip() for b in args.budgets.split(",") if b.strip()),
            "budget_mode": args.budget_mode,
            "ks": args.k,
            "split": args.split,
            "seed": args.seed,
            "history": args.history,
            "counters": args.counters,
            "sampling": sampling_from_args(args),
            "backend": backend_from_args(args),
            "bootstrap": args.bootstrap,
            "max_active": args.max_active,
            "allow_errors": args.allow_errors,
        },
        where="eval",
    )
    try:
        with progress_reporter("trajectories") as update:
            result = run_eval(config, Path(args.out), on_progress=update)
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


def config_items(env: str, env_args: dict[str, str]) -> dict[str, object]:
    """Environment options with their typed values (so run.json stores ``6``, not ``"6"``)."""
    typed = env_config(env, env_args)
    return {key: getattr(typed, key) for key in env_args}
