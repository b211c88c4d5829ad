"""``arlkit budgetmix``: BudgetMix's candidate budgets, and an audit of a finished run."""

from __future__ import annotations

import argparse

from arlkit.cli import UsageError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("budgetmix", help="BudgetMix candidate budgets and run audits", description=__doc__)
    actions = p.add_subparsers(dest="budgetmix_command", metavar="ACTION", parser_class=type(p))
    actions.required = True
    plan = actions.add_parser("plan", help="print the candidate budgets for T_max",
                              description="Candidates ceil(i*T_max/10), i = 1..10, computed in integers.")
    plan.add_argument("--tmax", type=int, required=True, help="the environment's full budget T_max")
    plan.set_defaults(handler=_plan)
    audit = actions.add_parser(
        "audit", help="check a finished training run against the BudgetMix rules",
        description="Checks rollouts.jsonl of a run: one budget per group, budgets from the candidates, uniform "
        "draws (chi-square p-value), prompts announcing the sampled budget, zero reward on exhausted budgets. "
        "Exit code 0 when every check passes, 1 otherwise.",
    )
    audit.add_argument("run", help="training run directory, or a verl data file (.parquet) from `arlkit verl data`")
    audit.add_argument("--alpha", type=float, default=0.01, help="fail the uniformity check below this p-value")
    audit.set_defaults(handler=_audit)


def _plan(args: argparse.Namespace) -> int:
    from arlkit.recipes.budgetmix import budget_candidates

    if args.tmax < 1:
        raise UsageError(f"--tmax must be >= 1, got {args.tmax}")
    print(" ".join(str(t) for t in budget_candidates(args.tmax)))
    return 0


def _audit(args: argparse.Namespace) -> int:
    from arlkit.recipes.budgetmix import audit_budgetmix

    try:
        report = audit_budgetmix(args.run, alpha=args.alpha)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise UsageError(str(exc)) from None
    print(report.render())
    return 0 if report.passed else 1
