"""Multi-turn rollout throughput of the ``hf`` backend vs a naive per-trajectory ``generate`` loop
(issue #7's benchmark).

Both sides play the *same* 10-turn FrozenLake episodes (same tasks, seeds, prompts and greedy
replies, so the same lengths) with the micro model, side by side in one process:

- **arlkit**: the rollout engine with :class:`HFPolicy` (one batched call per turn, KV caches reused
  across turns, shared prefixes computed once);
- **naive**: the same engine driving a policy that calls ``model.generate`` once per trajectory per
  turn on the fully re-encoded history (the chat template applied to the whole conversation).

Reported: completed turns per second for each and their ratio; the work ratio (tokens the naive
loop runs through the model / tokens the engine runs: the speed-up from doing less work alone, at
equal cost per token); the share of prompt tokens the engine actually had to encode; whether the
replies agree; and the engine's generated tokens per second against the machine's measured fp32
matmul peak (2 x parameters FLOP per token). Three prompts are measured: ``announced`` (the counters
sit near the top of the system prompt and change every turn, so only the shared head can be
reused), ``announced-obs`` (the counters after each observation, as the demo uses) and ``hidden``
(the prompt only grows). Both sides use the same attention implementation unless
``--naive-attention`` says otherwise.

    python benchmarks/bench_rollout.py [--size micro] [--trajectories 32] [--max-new-tokens 16]
                                       [--threads 1] [--modes announced,announced-obs,hidden]
                                       [--repeats 1] [--naive-attention same|sdpa|eager]

On a loaded shared CPU keep ``--threads 1``: oversubscribed intra-op threads make figures noisy.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from arlkit.envs import make
from arlkit.policies import Reply, Request, SamplingConfig
from arlkit.policies.hf import DEFAULT_STOP, HFPolicy, load_hf_model
from arlkit.rollout.corpus import init_tiny_model
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

ENV = {"size": 4, "t_max": 10, "success_rate": 0.8}
BUDGET = 10


class NaivePolicy:
    """One ``model.generate`` call per request on the whole re-encoded conversation."""

    name = "naive"

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int) -> None:
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.prompt_tokens = 0

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        replies = []
        for request in requests:
            text = self.tokenizer.apply_chat_template(
                [dict(m) for m in request.messages], tokenize=False, add_generation_prompt=True
            )
            ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
            self.prompt_tokens += ids.shape[1]
            with torch.inference_mode():
                out = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    stop_strings=list(DEFAULT_STOP),
                    tokenizer=self.tokenizer,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[0, ids.shape[1] :].tolist()
            replies.append(Reply(self.tokenizer.decode(new, skip_special_tokens=True), token_ids=tuple(new)))
        return replies


def matmul_peak(seconds: float = 2.0) -> float:
    """Best fp32 matmul FLOP/s over square sizes 512..2048 with the current thread count."""
    best = 0.0
    for n in (512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        reps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            a @ b
            reps += 1
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - start))
    return best


def run(policy: Any, mode: str, trajectories: int) -> tuple[list[Any], float]:
    tasks = make("frozenlake", **ENV).tasks("test", trajectories // 2)
    jobs = make_jobs(tasks, 2, BUDGET, seed=7)
    start = time.perf_counter()
    # "announced-obs": announced budget with the counters after each observation (prefix-stable chat)
    prompt = PromptConfig("announced", counters="observation") if mode == "announced-obs" else PromptConfig(mode)  # type: ignore[arg-type]
    result = run_rollouts(lambda: make("frozenlake", **ENV), jobs, policy, prompt)
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="micro", choices=["nano", "micro"])
    parser.add_argument("--model", default=None, help="an existing model directory (default: build --size)")
    parser.add_argument("--trajectories", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--modes", default="announced,announced-obs,hidden")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs of both sides; medians reported")
    parser.add_argument("--naive-attention", default="same",
                        help="attention implementation of the naive loop: 'same' as the engine's (default: only the "
                             "engine differs), or e.g. 'sdpa' (transformers' default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else init_tiny_model(args.size, Path(tmp) / args.size)
        model, tokenizer = load_hf_model(path)
        params = sum(p.numel() for p in model.parameters())
        sampling = SamplingConfig(temperature=0.0, max_new_tokens=args.max_new_tokens)
        peak = matmul_peak()
        print(f"model {path.name}: {params / 1e6:.2f}M parameters; {args.trajectories} episodes x {BUDGET} turns; "
              f"greedy, <= {args.max_new_tokens} new tokens; {args.threads} thread(s); "
              f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s")
        header = (f"{'prompt':13} {'arlkit turns/s':>14} {'naive turns/s':>14} {'ratio':>6} {'work':>6} {'encoded':>8} {'same':>5} "
                  f"{'gen tok/s':>9} {'of peak':>8} {'all tok/s':>9} {'of peak':>8}")
        print(header)
        for mode in args.modes.split(","):
            fast_times, slow_times = [], []
            for _ in range(args.repeats):  # interleaved, so that load from other jobs hits both sides
                policy = HFPolicy(model, tokenizer, sampling, name="arlkit")
                fast, t_fast = run(policy, mode, args.trajectories)
                naive = NaivePolicy(model, tokenizer, args.max_new_tokens)
                if args.naive_attention != "same":
                    model.set_attn_implementation(args.naive_attention)
                slow, t_slow = run(naive, mode, args.trajectories)
                fast_times.append(t_fast)
                slow_times.append(t_slow)
            t_fast, t_slow = statistics.median(fast_times), statistics.median(slow_times)
            turns = sum(len(t.turns) for t in fast)
            pairs = [(a, b) for s, t in zip(fast, slow, strict=True) for a, b in zip(s.turns, t.turns)]
            same = sum(a.reply == b.reply for a, b in pairs) / max(1, len(pairs))
            assert turns == sum(len(t.turns) for t in slow), "the two runs played different episodes"
            stats = policy.stats
            encoded = stats["prefilled_tokens"] / max(1, stats["prompt_tokens"])
            tok_s = stats["generated_tokens"] / t_fast
            all_s = (stats["generated_tokens"] + stats["prefilled_tokens"]) / t_fast
            # Tokens each side runs through the model: the speed-up from doing less work alone, at equal cost per token.
            work = (naive.prompt_tokens + stats["generated_tokens"]) / (stats["prefilled_tokens"] + stats["generated_tokens"])
            print(f"{mode:13} {turns / t_fast:14.1f} {turns / t_slow:14.1f} {t_slow / t_fast:5.1f}x {work:5.1f}x {encoded:8.0%} "
                  f"{same:5.0%} {tok_s:9.0f} {tok_s * 2 * params / peak:8.2%} {all_s:9.0f} {all_s * 2 * params / peak:8.2%}",
                  flush=True)
            if args.repeats > 1:
                ratios = ", ".join(f"{s_ / f_:.1f}x" for f_, s_ in zip(fast_times, slow_times, strict=True))
                print(f"{'':13} ratio of each repeat: {ratios}")
        naive_attention = policy.attn_implementation if args.naive_attention == "same" else args.naive_attention
        print(f"(attention: {policy.attn_implementation}, naive loop {naive_attention}; 'encoded' = prompt tokens the "
              "engine had to encode, the rest "
              "came from reused KV caches; 'work' = tokens the naive loop runs through the model / tokens the engine does "
              "(the speed-up at equal cost per token); 'same' = identical replies in both runs; 'gen tok/s' = generated tokens per "
              "second of the arlkit run, 'all tok/s' = generated + encoded; 'of peak' = tokens/s x 2 x parameters / "
              "measured fp32 matmul FLOP/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
