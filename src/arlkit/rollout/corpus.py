"""The embedded tiny model's tokenizer corpus, and the builder that uses it.

Scripted policies (random and a noisy oracle) play arlkit's environments through the rollout
engine and budget-aware prompts, in both budget modes and both prompt profiles; every conversation a policy was shown, and
every reply, rendered in ChatML (:func:`arlkit.policies.tiny.render_chatml`), is the corpus, so the
tokenizer learns exactly the text it will see. :func:`init_tiny_model` builds the model
(:func:`arlkit.policies.tiny.build_tiny_model`) on it; the corpus depends only on the seed and
arlkit's code, so the same call writes byte-identical files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from arlkit.envs import list_envs, make
from arlkit.policies.protocol import Message
from arlkit.policies.scripted import NoisyOraclePolicy, RandomPolicy
from arlkit.policies.tiny import build_tiny_model, render_chatml
from arlkit.rollout.engine import EngineConfig, make_jobs, run_rollouts
from arlkit.rollout.prompts import PromptConfig
from arlkit.rollout.records import Trajectory

__all__ = ["corpus_texts", "init_tiny_model"]


# -- corpus ------------------------------------------------------------------------------------


# (environment, config overrides, tasks, samples, budgets) played for the corpus.
_CORPUS_PLAN: tuple[tuple[str, dict[str, object], int, int, tuple[int, ...]], ...] = (
    ("frozenlake", {"size": 4, "t_max": 24, "success_rate": 0.8}, 12, 2, (6, 24)),
    ("frozenlake", {"size": 5, "t_max": 32}, 8, 2, (8, 32)),
    ("frozenlake", {"size": 6, "t_max": 70, "slippery": False}, 6, 1, (12,)),
    ("sokoban", {}, 4, 2, (8,)),
)

# The prompts shown: both budget modes of the RT profile, and the compact profile's announced budgets.
_CORPUS_PROMPTS = (PromptConfig("announced"), PromptConfig("hidden"), PromptConfig("announced", profile="compact"))


def _conversations(trajectories: Sequence[Trajectory]) -> list[list[Message]]:
    """Every prompt the policy was shown, followed by its reply, in the order the engine asked:
    turn by turn, and within a turn in job order (every job of the call was active from the first
    tick, so each tick asked every running trajectory, in job order, for its next turn)."""
    longest = max((len(t.turns) for t in trajectories), default=0)
    out = []
    for k in range(longest):
        for trajectory in trajectories:
            if k < len(trajectory.turns):
                turn = trajectory.turns[k]
                assert turn.prompt is not None  # kept by run_rollouts(keep_prompts=True)
                out.append([*turn.prompt.messages, {"role": "assistant", "content": turn.reply}])
    return out


def corpus_texts(seed: int = 0) -> list[str]:
    """ChatML transcripts of scripted rollouts on arlkit's environments (the tokenizer's corpus).

    Every prompt a policy is shown (one per turn, so each turn's budget counters appear) is
    rendered, followed by its reply. Environments listed in the plan but not registered are skipped.
    """
    known = set(list_envs())
    texts: list[str] = []
    for index, (env_name, overrides, n_tasks, samples, budgets) in enumerate(_CORPUS_PLAN):
        if env_name not in known:
            continue
        tasks = make(env_name, **overrides).tasks("train", n_tasks)
        for prompt in _CORPUS_PROMPTS:
            for policy in (RandomPolicy(), NoisyOraclePolicy(0.3, "noisy-oracle:0.3")):
                for budget in budgets:
                    jobs = make_jobs(tasks, samples, budget, seed + 1000 * index)
                    trajectories = run_rollouts(
                        lambda env_name=env_name, overrides=overrides: make(env_name, **overrides),
                        jobs,
                        policy,
                        prompt,
                        engine=EngineConfig(max_active=len(jobs)),  # all at once: the corpus's order is the engine's
                        keep_prompts=True,
                    )
                    texts.extend(render_chatml(c) for c in _conversations(trajectories))
    return texts


def init_tiny_model(size: str, out_dir: str | Path, seed: int = 0, *, overwrite: bool = False) -> Path:
    """Build the tiny model ``size`` (``nano`` or ``micro``) into ``out_dir`` offline, its tokenizer
    trained on :func:`corpus_texts`, and return its path (``arlkit model init``; see
    :func:`arlkit.policies.tiny.build_tiny_model` for the files and errors)."""
    return build_tiny_model(size, out_dir, corpus_texts(seed), seed, overwrite=overwrite)
