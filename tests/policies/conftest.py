"""Fixtures of the policy tests: the nano model as an ``hf`` policy, and recorded real prompts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch

from arlkit.envs import make
from arlkit.policies import Reply, Request, SamplingConfig
from arlkit.policies.hf import HFPolicy, load_hf_model
from arlkit.policies.scripted import NoisyOraclePolicy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts

ENV = {"size": 4, "t_max": 10, "success_rate": 0.8}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny models on a shared 2-core CPU: one thread avoids OpenMP stalls and keeps timings sane.
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="session")
def spiky(tiny_model_dir: Path) -> tuple[object, object]:
    """``(model, tokenizer)``: the nano model with larger random weights (std 0.15, seeded), so that
    greedy replies vary with the prompt and top logits are well separated (the freshly initialised
    model's near-uniform logits would make every comparison trivial)."""
    model, tokenizer = load_hf_model(tiny_model_dir)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 0.15, generator=generator)
    return model, tokenizer


def make_hf(spiky: tuple[object, object], **kwargs: object) -> HFPolicy:
    sampling = kwargs.pop("sampling", SamplingConfig(temperature=0.0, max_new_tokens=12))
    attention = kwargs.pop("attention", "arlkit")
    model, tokenizer = spiky
    return HFPolicy(model, tokenizer, sampling, attn_implementation=attention, **kwargs)  # type: ignore[arg-type]


class Recorder:
    """A scripted policy that keeps every request it answers."""

    name = "recorder"

    def __init__(self) -> None:
        self.inner = NoisyOraclePolicy(0.5, "noisy")
        self.requests: list[Request] = []

    def generate(self, requests: Sequence[Request]) -> list[Reply]:
        self.requests.extend(requests)
        return self.inner.generate(requests)


@pytest.fixture(scope="session")
def real_requests() -> list[Request]:
    """Requests of real FrozenLake rollouts (budget-aware prompts, growing histories), without
    the live environments."""
    recorder = Recorder()
    tasks = make("frozenlake", **ENV).tasks("test", 3)
    run_rollouts(lambda: make("frozenlake", **ENV), make_jobs(tasks, 2, 4, seed=3), recorder, PromptConfig())
    return [Request(r.messages, r.seed, r.turn, None, r.remaining) for r in recorder.requests]
