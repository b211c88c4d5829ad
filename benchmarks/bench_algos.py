"""Time every policy loss and advantage estimator of ``arlkit.algos`` on a (256, 512) batch.

Each candidate is timed relative to plain token-mean PPO (the ``vanilla`` loss, forward + backward). All
candidates run side by side in one process, round-robin in a shuffled order each round, and the table
reports the median over rounds, so machine load hits every candidate alike. Losses are timed forward +
backward (what a trainer does per mini-batch); estimators forward only, under ``no_grad`` (they run
once per rollout batch). The issue's bar is <= 3x the reference.

    python benchmarks/bench_algos.py [--rounds 30] [--threads N] [--device cpu|cuda] [--strict]

On a loaded shared CPU pass ``--threads 1``: oversubscribed intra-op threads make every figure noisy.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from arlkit.algos import (
    AdvantageInputs,
    agg_loss,
    budget_anchor,
    compute_advantage,
    compute_value_loss,
    kl_penalty,
    policy_loss,
)

B, L = 256, 512
LIMIT = 3.0


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str
    run: Callable[[], object]


def _batch(device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(32, L + 1, (B,), generator=g)
    mask = (torch.arange(L).unsqueeze(0) < lengths.unsqueeze(1)).float()
    old = -torch.rand(B, L, generator=g) * 3
    new = old + 0.1 * torch.randn(B, L, generator=g)
    adv = torch.randn(B, 1, generator=g).expand(B, L).contiguous()
    ref = old + 0.05 * torch.randn(B, L, generator=g)
    out = {k: v.to(device) for k, v in {"mask": mask, "old": old, "new": new, "adv": adv, "ref": ref}.items()}
    out["new"].requires_grad_(True)
    return out


def _step_rows(mask: torch.Tensor, seed: int = 0) -> AdvantageInputs:
    """256 step rows: 8 groups x 8 trajectories x 4 steps, budget T = 4, a small state space."""
    g = torch.Generator().manual_seed(seed)
    index, traj, steps, anchors = [], [], [], []
    for group in range(8):
        for k in range(8):
            for t in range(4):
                index.append(group)
                traj.append(group * 8 + k)
                steps.append(t)
                anchors.append(budget_anchor(int(torch.randint(0, 3, (1,), generator=g)), 4, t))
    step_rewards = torch.where(torch.tensor(steps) == 3, torch.randint(0, 2, (B,), generator=g).float(), 0.0)
    step_rewards = step_rewards - 0.1 * (torch.rand(B, generator=g) < 0.2).float()
    traj_t = torch.tensor(traj)
    episode = torch.zeros(64).index_add_(0, traj_t, step_rewards)[traj_t]
    last = mask.sum(-1).long().cpu() - 1
    dev = mask.device
    return AdvantageInputs(
        mask,
        token_level_rewards=torch.zeros(B, L).index_put_((torch.arange(B), last), episode).to(dev),
        scores=episode.to(dev),
        index=index,
        traj_index=traj,
        step_index=torch.tensor(steps, device=dev),
        step_rewards=step_rewards.to(dev),
        anchor_keys=anchors,
        values=torch.randn(B, L, generator=g).to(dev),
        old_entropy=torch.rand(B, L, generator=g).to(dev),
    )


def candidates(device: str = "cpu") -> list[Candidate]:
    t = _batch(device)
    mask, old, new, adv = t["mask"], t["old"], t["new"], t["adv"]
    inputs = _step_rows(mask)
    values = torch.randn(B, L, device=device)
    returns = values + torch.randn(B, L, device=device)
    vpreds = torch.randn(B, L, device=device, requires_grad=True)

    def loss(name: str, mode: str = "token-mean", **hp: Any) -> Callable[[], object]:
        def run() -> object:
            new.grad = None
            out = policy_loss(name, old, new, adv, mask, mode, **hp).loss
            out.backward()
            return out

        return run

    def forward_only() -> object:
        with torch.no_grad():
            return policy_loss("vanilla", old, new, adv, mask).loss

    def value() -> object:
        vpreds.grad = None
        out = compute_value_loss(vpreds, returns, values, mask).loss
        out.backward()
        return out

    def kl() -> object:
        new.grad = None
        out = agg_loss(kl_penalty(new, t["ref"], "low_var_kl"), mask, "token-mean")
        out.backward()
        return out

    def est(name: str, **cfg: object) -> Callable[[], object]:
        return lambda: compute_advantage(name, inputs, **cfg)

    return [
        Candidate("vanilla token-mean (reference)", "loss", loss("vanilla")),
        Candidate("vanilla token-mean, forward only", "loss", forward_only),
        Candidate("vanilla seq-mean-token-mean", "loss", loss("vanilla", "seq-mean-token-mean")),
        Candidate("vanilla seq-mean-token-sum-norm", "loss", loss("vanilla", "seq-mean-token-sum-norm")),
        Candidate("vanilla + sequence mask", "loss", loss("vanilla", sequence_mask=True)),
        Candidate("gspo", "loss", loss("gspo")),
        Candidate("cispo", "loss", loss("cispo")),
        Candidate("cispo + sequence mask", "loss", loss("cispo", sequence_mask=True)),
        Candidate("sapo", "loss", loss("sapo")),
        Candidate("sapo + sequence mask", "loss", loss("sapo", sequence_mask=True)),
        Candidate("value loss (clipped)", "loss", value),
        Candidate("low_var_kl + token-mean", "loss", kl),
        Candidate("grpo", "estimator", est("grpo")),
        Candidate("grpo per_trajectory", "estimator", est("grpo", step_stats="per_trajectory")),
        Candidate("drgrpo", "estimator", est("grpo", norm_adv_by_std_in_grpo=False)),
        Candidate("rloo", "estimator", est("rloo")),
        Candidate("reinforce_plus_plus_baseline", "estimator", est("reinforce_plus_plus_baseline")),
        Candidate("gigpo", "estimator", est("gigpo")),
        Candidate("gae", "estimator", est("gae")),
        Candidate("empg", "estimator", est("empg")),
    ]


def measure(cands: list[Candidate], rounds: int, device: str = "cpu", warmup: int = 3, seed: int = 0
            ) -> dict[str, list[float]]:
    """Seconds per call for every candidate, ``rounds`` samples each, interleaved round-robin."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    times: dict[str, list[float]] = {c.name: [] for c in cands}
    order = list(cands)
    rng = random.Random(seed)
    for r in range(warmup + rounds):
        rng.shuffle(order)
        for c in order:
            sync()
            start = time.perf_counter()
            c.run()
            sync()
            elapsed = time.perf_counter() - start
            if r >= warmup:
                times[c.name].append(elapsed)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--strict", action="store_true", help=f"exit 1 if any candidate exceeds {LIMIT}x")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cands = candidates(args.device)
    times = measure(cands, args.rounds, args.device)
    kinds = {c.name: c.kind for c in cands}
    ref = statistics.median(times["vanilla token-mean (reference)"])
    where = f"{torch.get_num_threads()} threads" if args.device == "cpu" else args.device
    print(f"arlkit.algos benchmark: B={B}, L={L}, float32, {where}, "
          f"median of {args.rounds} interleaved rounds; ratio = median / vanilla token-mean (fwd+bwd)")
    print(f"{'candidate':<36} {'kind':<10} {'median ms':>10} {'ratio':>7}")
    worst = 0.0
    for name, samples in times.items():
        med = statistics.median(samples)
        ratio = med / ref
        worst = max(worst, ratio)
        flag = "" if ratio <= LIMIT else f"  > {LIMIT:g}x"
        print(f"{name:<36} {kinds[name]:<10} {1e3 * med:>10.3f} {ratio:>6.2f}x{flag}")
    print(f"worst ratio {worst:.2f}x (bar: {LIMIT:g}x)")
    return 1 if args.strict and worst > LIMIT else 0


if __name__ == "__main__":
    raise SystemExit(main())
