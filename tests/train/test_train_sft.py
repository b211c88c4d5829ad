"""Behaviour cloning: demonstrations through the agent's prompts, loss on reply tokens only."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from arlkit.config import ConfigError, EnvSpec
from arlkit.envs import make
from arlkit.policies import SamplingConfig
from arlkit.policies.hf import HFPolicy
from arlkit.rollout import PromptConfig, make_jobs, run_rollouts
from arlkit.train import OptimConfig, SFTConfig
from arlkit.train.batch import ChatTokens
from arlkit.train.model import load_model
from arlkit.recipes.sft import collect_demonstrations, sft_rows

from .conftest import EASY_ENV

FOUR_MAPS = {"size": 4, "slippery": False, "t_max": 8}


def _play(model_dir: Path, env_args: dict, tasks: list) -> tuple[float, float]:
    model, tokenizer = load_model(model_dir, attn_implementation="eager")
    policy = HFPolicy(model, tokenizer, SamplingConfig(temperature=1.0, max_new_tokens=8), attn_implementation="eager")
    trajectories = run_rollouts(lambda: make("frozenlake", **env_args), make_jobs(tasks, 32, env_args["t_max"], 7),
                                policy, PromptConfig("announced", 1))
    valid = [turn.action is not None for t in trajectories for turn in t.turns]
    return float(np.mean([t.success for t in trajectories])), float(np.mean(valid))


def test_bc_raises_success_well_above_the_untrained_model(nano_dir: Path, tmp_path: Path) -> None:
    from arlkit.recipes import run_sft

    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", FOUR_MAPS), expert="noisy-oracle:0.3", tasks=4,
                       samples=4, prompt=PromptConfig(history=1), steps=60, batch_rows=32,
                       optim=OptimConfig(lr=3e-3, warmup_steps=5))
    result = run_sft(config, tmp_path / "bc", progress=False)
    tasks = make("frozenlake", **FOUR_MAPS).tasks("train", 4)
    untrained, untrained_valid = _play(nano_dir, FOUR_MAPS, tasks)
    cloned, cloned_valid = _play(result.model_dir, FOUR_MAPS, tasks)
    # measured: untrained 0.0 (no parsable action at all); cloned ~0.09 with ~99% valid replies (128
    # trajectories). Sixty steps teach the format and the expert's action marginal (mostly Down / Right),
    # which reaches the goal on some maps; the state -> action map takes far more (docs/training.md).
    assert untrained == 0.0 and untrained_valid < 0.05
    assert cloned >= untrained + 0.05 and cloned_valid > 0.9, (cloned, cloned_valid)
    summary = json.loads((tmp_path / "bc" / "sft.json").read_text())
    assert summary["rows"] == result.rows > 0 and summary["config"]["expert"] == "noisy-oracle:0.3"
    assert (tmp_path / "bc" / "metrics.jsonl").read_text().count("\n") == 60


def test_demonstrations_use_the_agents_prompts_and_oracle_labels(nano_dir: Path) -> None:
    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", dict(EASY_ENV, t_max=5)), expert="noisy-oracle:1.0",
                       tasks=3, samples=2, prompt=PromptConfig(history=1), think="")
    demos = collect_demonstrations(config)
    assert len(demos.trajectories) == 6 and demos.kept == list(range(6))
    for t, labels in zip(demos.trajectories, demos.targets, strict=True):
        assert len(labels) == len(t.turns)
        for k, (turn, label) in enumerate(zip(t.turns, labels, strict=True)):
            messages = turn.prompt.messages
            assert f"{t.budget} turns in total, {k} completed, {t.budget - k} remaining" in messages[0]["content"]
            assert turn.remaining == t.budget - k
            assert label.startswith("<think></think><action>") and turn.reply.startswith("<think>exploring")
    _, tokenizer = load_model(nano_dir, attn_implementation="eager")
    chat = ChatTokens(tokenizer)
    rows, systems = sft_rows(demos, chat)
    assert len(rows) == len(systems) == sum(len(t.turns) for t in demos.trajectories)
    row = rows[0]
    target_text = tokenizer.decode([row.ids[i] for i in row.targets])
    assert target_text == demos.targets[0][0]
    assert list(row.targets) == list(range(row.targets[0], len(row.ids)))  # targets: the reply, at the end

    kept = collect_demonstrations(SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", EASY_ENV), expert="oracle",
                                            keep="success", tasks=3, samples=1))
    assert kept.kept and all(kept.trajectories[i].success for i in kept.kept)


def test_trajectory_rows_hold_the_executed_replies_and_target_only_the_optimal_ones(nano_dir: Path) -> None:

    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", dict(EASY_ENV, t_max=6)), expert="noisy-oracle:0.5",
                       tasks=4, samples=2, prompt=PromptConfig(history=None, counters="observation"), rows="trajectory")
    demos = collect_demonstrations(config)
    _, tokenizer = load_model(nano_dir, attn_implementation="eager")
    chat = ChatTokens(tokenizer)
    rows, systems = sft_rows(demos, chat, "trajectory")
    wanted_per_trajectory = []
    for i in demos.kept:
        t = demos.trajectories[i]
        wanted = [(turn.action or "").lower() in demos.optimal[i][k] for k, turn in enumerate(t.turns)]
        if any(wanted):
            wanted_per_trajectory.append((t, wanted))
    assert len(rows) == len(systems) == len(wanted_per_trajectory) > 0
    some_skipped = False
    for row, (t, wanted) in zip(rows, wanted_per_trajectory, strict=True):
        text = tokenizer.decode(list(row.ids))
        # the row is the whole executed chat: the first prompt, then every reply in order
        assert text.startswith(chat.render(t.turns[0].prompt.messages))
        cursor = len(chat.render(t.turns[0].prompt.messages))
        for turn in t.turns:
            cursor = text.index(turn.reply, cursor) + len(turn.reply)
        # the targets are exactly the optimal replies' tokens, in order
        targets = tokenizer.decode([row.ids[p] for p in row.targets])
        assert targets == "".join(turn.reply for turn, w in zip(t.turns, wanted, strict=True) if w)
        some_skipped |= not all(wanted)
    assert some_skipped  # eps 0.5: some executed replies are context only
    with pytest.raises(ValueError, match="history"):
        SFTConfig(model=str(nano_dir), prompt=PromptConfig(history=1), rows="trajectory")


def test_an_interrupted_sft_run_resumes_to_the_uninterrupted_result(nano_dir: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from arlkit.recipes import run_sft
    from arlkit.recipes import sft as sft_module

    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", FOUR_MAPS), expert="noisy-oracle:0.3", tasks=2,
                       samples=2, prompt=PromptConfig(history=1), steps=7, batch_rows=8,
                       optim=OptimConfig(lr=3e-3, warmup_steps=2), checkpoint_every=2)
    reference = run_sft(config, tmp_path / "reference", progress=False)
    # the identity is the whole config, defaults included
    recorded = json.loads((tmp_path / "reference" / "run.json").read_text())["config"]
    assert recorded["prompt"]["profile"] == "rt" and recorded["label_noise"] == 0.0
    # TensorBoard holds what metrics.jsonl holds, as train's do
    from arlkit.train.tracking import read_metrics, read_tb_scalars

    scalars = {(step, tag): value for step, tag, value in read_tb_scalars(tmp_path / "reference" / "tb")}
    logged = read_metrics(tmp_path / "reference" / "metrics.jsonl")
    assert {tag for _, tag in scalars} >= {"sft/loss", "sft/grad_norm", "sft/lr"} and len(logged) == 7
    assert all(abs(scalars[(m["step"], "sft/loss")] - m["sft/loss"]) < 1e-6 for m in logged)

    real_score_rows, calls = sft_module.score_rows, [0]

    def killed_at_step_6(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt  # the run dies after the checkpoint of step 4, inside step 6
        return real_score_rows(*args, **kwargs)

    monkeypatch.setattr(sft_module, "score_rows", killed_at_step_6)
    with pytest.raises(KeyboardInterrupt):
        run_sft(config, tmp_path / "resumed", progress=False)
    monkeypatch.setattr(sft_module, "score_rows", real_score_rows)
    assert (tmp_path / "resumed" / "checkpoints").is_dir() and not (tmp_path / "resumed" / "model").exists()
    resumed = run_sft(config, tmp_path / "resumed", progress=False)
    for name in ("model.safetensors",):
        assert (resumed.model_dir / name).read_bytes() == (reference.model_dir / name).read_bytes()
    assert (tmp_path / "resumed" / "metrics.jsonl").read_text() == (tmp_path / "reference" / "metrics.jsonl").read_text()
    assert resumed.final_loss == reference.final_loss
    again = run_sft(config, tmp_path / "resumed", progress=False)  # finished: returned as it is
    assert again.final_loss == resumed.final_loss
    with pytest.raises(ConfigError, match="holds a different run"):
        run_sft(SFTConfig(**{**config.__dict__, "steps": 8}), tmp_path / "resumed", progress=False)


def test_share_prefix_off_clones_the_same_model_with_unshared_forwards(nano_dir: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from arlkit.recipes import run_sft
    from arlkit.recipes import sft as sft_module

    config = SFTConfig(model=str(nano_dir), env=EnvSpec("frozenlake", FOUR_MAPS), expert="noisy-oracle:0.3", tasks=2,
                       samples=2, prompt=PromptConfig("announced", history=0, profile="compact"), steps=3, batch_rows=16,
                       optim=OptimConfig(lr=3e-3, warmup_steps=1))
    real_score_rows, asked = sft_module.score_rows, []

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(kwargs["share_prefix"])
        return real_score_rows(*args, **kwargs)

    monkeypatch.setattr(sft_module, "score_rows", recording)
    shared = run_sft(config, tmp_path / "shared", progress=False)
    unshared = run_sft(replace(config, model=replace(config.model, share_prefix=False)), tmp_path / "unshared",
                       progress=False)
    assert asked == [True] * 3 + [False] * 3
    # the same cloning, computed by other forwards: equal up to float rounding
    assert abs(unshared.final_loss - shared.final_loss) < 1e-4 * max(1.0, shared.final_loss)


class _RequestTimeLabels:
    """The labels as they were computed before the trajectories recorded their prompts: at request time,
    from the live environment, for the remaining budget the request announced."""

    def __init__(self, inner, think: str) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.think, self.name = inner, think, inner.name
        self.labels: dict[tuple[int, int], str] = {}
        self.optimal: dict[tuple[int, int], set[str]] = {}

    def generate(self, requests):  # type: ignore[no-untyped-def]
        from arlkit.policies.scripted import format_reply, oracle_horizon

        for request in requests:
            best = list(request.env.optimal_actions(oracle_horizon(request)))
            self.optimal[(request.seed, request.turn)] = {a.lower() for a in best}
            rng = np.random.default_rng([request.seed & 0xFFFFFFFFFFFF, request.turn, 7])
            self.labels[(request.seed, request.turn)] = format_reply(self.think, best[int(rng.integers(len(best)))])
        return self.inner.generate(requests)


@pytest.mark.parametrize("budget_mode,budget", [("announced", "budgetmix"), ("hidden", "full")])
def test_relabelling_from_the_replayed_trajectory_gives_the_request_time_labels(
    monkeypatch: pytest.MonkeyPatch, budget_mode: str, budget: str
) -> None:
    from arlkit.recipes import sft
    from arlkit.policies import make_policy

    seen: list[_RequestTimeLabels] = []

    def wrapped(spec: str) -> _RequestTimeLabels:
        seen.append(_RequestTimeLabels(make_policy(spec), "plan"))
        return seen[-1]

    monkeypatch.setattr(sft, "make_policy", wrapped)
    # slippery maps and a noisy expert: the states (and the oracle's horizons) differ from turn to turn
    config = SFTConfig(env=EnvSpec("frozenlake", {"size": 4, "t_max": 12}), expert="noisy-oracle:0.5", tasks=4,
                       samples=3, prompt=PromptConfig(budget_mode=budget_mode, history=1), think="plan", budget=budget)
    demos = collect_demonstrations(config)
    (live,) = seen
    assert sum(len(t.turns) for t in demos.trajectories) > 12
    for t, labels, optimal in zip(demos.trajectories, demos.targets, demos.optimal, strict=True):
        assert t.policy == "noisy-oracle:0.5"
        assert labels == [live.labels[(t.policy_seed, k)] for k in range(len(t.turns))]
        assert optimal == [live.optimal[(t.policy_seed, k)] for k in range(len(t.turns))]
        assert [turn.remaining for turn in t.turns] == (
            [t.budget - k for k in range(len(t.turns))] if budget_mode == "announced" else [None] * len(t.turns))


def test_label_horizon_t_max_labels_what_the_oracle_planning_for_t_max_would_do() -> None:
    """``label_horizon: t_max`` is a budget-unaware expert: every label is optimal for T_max whatever the
    prompt announces, and on budget-sensitive maps at a tight budget it differs from the budget-aware label."""
    from arlkit.analysis.states import replay

    args = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}
    common = dict(env=EnvSpec("frozenlake", args), expert="noisy-oracle:0.3", tasks=12, samples=2, budget="25%",
                  prompt=PromptConfig(history=0, profile="compact"))
    unaware = collect_demonstrations(SFTConfig(label_horizon="t_max", **common))
    aware = collect_demonstrations(SFTConfig(label_horizon="announced", **common))
    env = make("frozenlake", **args)
    tasks = {task.task_id: task for task in env.tasks("train", 12)}
    differ = 0
    for t, optimal, optimal_aware in zip(unaware.trajectories, unaware.optimal, aware.optimal, strict=True):
        assert t.budget == 8
        for k in replay(env, tasks[t.task_id], t):
            assert optimal[k] == {a.lower() for a in env.optimal_actions(32)}
            assert optimal_aware[k] == {a.lower() for a in env.optimal_actions(t.budget - k)}
            assert t.turns[k].prompt.messages[-1]["content"].startswith(f"turns remaining: {8 - k:02d} of 08\n")
            differ += optimal[k] != optimal_aware[k]
    assert differ > 0


def test_label_noise_replaces_that_share_of_labels_and_leaves_the_states_alone() -> None:
    """``label_noise`` swaps a label for a uniformly random action with that probability: the states
    (the expert's trajectories) stay the same, and the share of non-optimal labels matches
    ``eps * (1 - |optimal| / 4)`` averaged over the steps."""
    import re

    args = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_sensitive"}
    common = dict(env=EnvSpec("frozenlake", args), expert="noisy-oracle:0.3", tasks=40, samples=2,
                  label_horizon="t_max", prompt=PromptConfig(history=0, profile="compact"))
    clean = collect_demonstrations(SFTConfig(**common))
    noisy = collect_demonstrations(SFTConfig(label_noise=0.5, **common))
    assert [[turn.reply for turn in t.turns] for t in clean.trajectories] == [
        [turn.reply for turn in t.turns] for t in noisy.trajectories]
    assert clean.optimal == noisy.optimal

    def action(reply: str) -> str:
        match = re.fullmatch(r"<think></think><action>(\w+)</action>", reply)
        assert match is not None, reply
        return match.group(1).lower()

    steps = [(action(c), action(n), best) for cs, ns, bests in zip(clean.targets, noisy.targets, noisy.optimal,
                                                                    strict=True)
             for c, n, best in zip(cs, ns, bests, strict=True)]  # fmt: skip
    assert len(steps) > 300
    assert all(c in best for c, _, best in steps)
    wrong = sum(n not in best for _, n, best in steps) / len(steps)
    expected = sum(0.5 * (1 - len(best) / 4) for _, _, best in steps) / len(steps)
    assert abs(wrong - expected) < 0.06, (wrong, expected)
    assert {n for _, n, _ in steps} == {"left", "down", "right", "up"}


def test_label_noise_needs_relabelled_labels() -> None:
    with pytest.raises(ConfigError, match="label_noise"):
        collect_demonstrations(SFTConfig(env=EnvSpec("frozenlake", {"size": 4}), relabel=False, label_noise=0.1,
                                         tasks=2, samples=1))
    with pytest.raises(ValueError, match="label_noise"):
        SFTConfig(label_noise=1.5)


def test_aware_share_labels_that_share_of_trajectories_with_the_budget_aware_oracle() -> None:
    """``aware_share`` picks whole trajectories (by their seed) whose labels plan for the announced budget;
    the others keep the T_max labels, and the states are the same either way."""
    args = {"size": 5, "t_max": 32, "success_rate": 0.8, "task_set": "budget_fork", "headroom_threshold": 0.2}
    common = dict(env=EnvSpec("frozenlake", args), expert="noisy-oracle:0.3", tasks=60, samples=2, budget="25%",
                  prompt=PromptConfig(history=0, profile="compact"))
    unaware = collect_demonstrations(SFTConfig(label_horizon="t_max", **common))
    aware = collect_demonstrations(SFTConfig(label_horizon="announced", **common))
    mixed = collect_demonstrations(SFTConfig(label_horizon="t_max", aware_share=0.5, **common))
    assert [t.task_id for t in mixed.trajectories] == [t.task_id for t in unaware.trajectories]
    kinds = []
    for u, a, m in zip(unaware.optimal, aware.optimal, mixed.optimal, strict=True):
        assert m in (u, a)  # each trajectory is labelled by one oracle throughout
        if u != a:
            kinds.append(m == a)
    # on budget-fork maps at 25% of T_max the two oracles disagree in most trajectories (at the first move)
    assert len(kinds) > 60
    assert 0.35 < sum(kinds) / len(kinds) < 0.65, sum(kinds) / len(kinds)


def test_aware_share_needs_the_budget_unaware_relabelling() -> None:
    with pytest.raises(ValueError, match="aware_share .* needs relabel: true and label_horizon: t_max"):
        SFTConfig(aware_share=0.3)  # label_horizon announced: already aware
    with pytest.raises(ValueError, match="aware_share"):
        SFTConfig(aware_share=0.3, label_horizon="t_max", relabel=False)
    with pytest.raises(ValueError, match="aware_share"):
        SFTConfig(aware_share=-0.1, label_horizon="t_max")
