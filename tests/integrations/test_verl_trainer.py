"""arlkit's step-row advantages inside verl's v1 trainer (``trainer.v1.trainer_mode=arlkit``).

On trajectories the agent loop played (FrozenLake under BudgetMix, groups of 4), the hook's GiGPO and
EMPG advantages equal what ``arlkit train`` computes for the same trajectories (its own step rows:
``build_batch`` + ``compute_advantage``); verl's own ``_compute_advantage`` runs around the hook
(against an in-memory stand-in for the TransferQueue holding the outputs as verl's agent-loop worker
stores them); ``import verl`` registers the trainer modes the moment verl's trainer is imported, and
not before."""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

import pytest
import torch

pytest.importorskip("verl", reason="verl is installed by `make test` (Makefile: VERL_PIN)")
pytest.importorskip("transfer_queue", reason="verl's v1 trainer needs TransferQueue, installed by `make test`")
from omegaconf import OmegaConf  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.v1 import get_trainer_cls, trainer_base  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from arlkit.algos import AdvantageInputs, RewardConfig, compute_advantage  # noqa: E402
from arlkit.integrations.verl_data import build_rows  # noqa: E402
from arlkit.integrations.verl_trainer import ArlkitTrainer, step_advantages  # noqa: E402
from arlkit.policies.chat import ChatTokens  # noqa: E402
from arlkit.train.batch import build_batch, pad_rows, score_trajectory  # noqa: E402

SESSIONS = 4
MOVES = ["Down", "Right", "Up", "Left"]


def _script(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"<think>t</think><action>{rng.choice(MOVES)}</action>" if rng.random() > 0.15 else "<action>Fly</action>"
            for _ in range(12)]


@pytest.fixture(scope="module")
def played(tokenizer: Any, verl_fakes: Any) -> dict[str, Any]:
    """Two BudgetMix groups of 4 samples: the agent loop's outputs with verl's keys, and the engine's
    trajectories on the same replies."""
    rows = build_rows("frozenlake", {"size": 4}, budget="budgetmix", groups=2, tasks=2, seed=11, layout="step")
    keys, outputs, trajectories = [], [], []
    for r, row in enumerate(rows):
        for session in range(SESSIONS):
            got, server = verl_fakes.play(tokenizer, row, _script(10 * r + session), session=session)
            trajectories.append(verl_fakes.engine_trajectory(row, verl_fakes.Replay(tokenizer, server), session=session))
            keys += [f"uid_{r}_{session}_{t}" for t in range(len(got))]  # verl's {uid}_{session}_{index}
            outputs += got
    return {"keys": keys, "outputs": outputs, "trajectories": trajectories}


def _verl_tensors(outputs: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(response_mask, token_level_rewards)`` as verl pads them: the reward score on the last token."""
    mask = pad_rows([torch.tensor(o.response_mask, dtype=torch.float32) for o in outputs],
                    max(len(o.response_mask) for o in outputs))
    rewards = torch.zeros_like(mask)
    for i, o in enumerate(outputs):
        rewards[i, len(o.response_mask) - 1] = o.reward_score
    return mask, rewards


def _arlkit_train(trajectories: list[Any], tokenizer: Any, name: str, entropy: torch.Tensor | None) -> torch.Tensor:
    """What ``arlkit train`` computes for these trajectories (recipes/rl.py's advantage step)."""
    outcomes = [score_trajectory(t, RewardConfig()) for t in trajectories]
    batch = build_batch(trajectories, outcomes, ChatTokens(tokenizer), step_rows=True, budget_anchors=True)
    return compute_advantage(name, AdvantageInputs(
        response_mask=batch.mask, token_level_rewards=batch.reward_at, scores=batch.score, index=batch.group,
        traj_index=batch.traj, step_index=torch.tensor(batch.step), step_rewards=batch.step_reward,
        anchor_keys=batch.anchors, old_entropy=entropy)).advantages


@pytest.mark.parametrize("name", ["gigpo", "empg"])
def test_step_advantages_equal_arlkit_trains(name: str, played: dict[str, Any], tokenizer: Any) -> None:
    outputs = played["outputs"]
    mask, rewards = _verl_tensors(outputs)
    entropy = torch.rand(mask.shape, generator=torch.Generator().manual_seed(3)) * mask if name == "empg" else None
    ours = step_advantages(f"arlkit_{name}", played["keys"], [o.extra_fields for o in outputs], mask, rewards,
                           entropy=entropy, algo_config=OmegaConf.create({"norm_adv_by_std_in_grpo": True}))
    expected = _arlkit_train(played["trajectories"], tokenizer, name, entropy)
    torch.testing.assert_close(ours.advantages, expected, atol=1e-6, rtol=1e-6)
    assert ours.advantages.abs().sum() > 0
    if name == "gigpo":  # anchors repeat across the group's trajectories, so the step term is not all zero
        assert float(ours.metrics["adv/step_adv_rows_frac"]) > 0


def test_anchors_carry_the_remaining_budget(played: dict[str, Any]) -> None:
    from arlkit.integrations.verl_steps import EXTRA_KEY, OutputInfo

    infos = [OutputInfo.from_dict(o.extra_fields[EXTRA_KEY]) for o in played["outputs"]]
    assert all(info.budgetmix for info in infos)
    anchors = {info.anchor(info.turns[0]) for info in infos}
    assert all(isinstance(a, tuple) and a[1] == info.budget - info.turns[0].step
               for a, info in zip((info.anchor(info.turns[0]) for info in infos), infos, strict=True))
    assert len(anchors) < len(infos)  # revisited (state, remaining) pairs: what GiGPO groups on


def test_refuses_rows_it_cannot_use(played: dict[str, Any]) -> None:
    outputs = played["outputs"][:3]
    mask, rewards = _verl_tensors(outputs)
    with pytest.raises(ValueError, match="arlkit_agent loop"):
        step_advantages("arlkit_gigpo", played["keys"][:3], [{}] * 3, mask, rewards)
    with pytest.raises(ValueError, match="not a step-row estimator"):
        step_advantages("arlkit_grpo", played["keys"][:3], [o.extra_fields for o in outputs], mask, rewards)


def _worker_fields(played: dict[str, Any], tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What verl's v1 agent-loop worker puts into the TransferQueue for the played sessions
    (``AgentLoopWorkerTQ._agent_loop_postprocess``, run on them; the put itself is caught)."""
    from verl.trainer.ppo.v1 import agent_loop_tq

    worker_cls = agent_loop_tq.AgentLoopWorkerTQ.__ray_metadata__.modified_class  # the class under ray.remote
    worker = object.__new__(worker_cls)  # with only what the postprocess reads of a worker
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    worker.processor, worker.tokenizer, worker.mm_processor_kwargs = None, tokenizer, {}
    caught: list[dict[str, Any]] = []

    def catch(fields: list[dict[str, Any]]) -> Any:
        caught.extend(fields)
        return list_of_dict_to_tensordict(fields)

    class Puts:
        async def async_kv_batch_put(self, **_: Any) -> None:
            return None

    monkeypatch.setattr(agent_loop_tq, "list_of_dict_to_tensordict", catch)
    monkeypatch.setattr(agent_loop_tq, "tq", Puts())
    sessions: dict[tuple[str, int], list[Any]] = {}
    for key, output in zip(played["keys"], played["outputs"], strict=True):
        uid, session, _ = key.rsplit("_", 2)
        sessions.setdefault((uid, int(session)), []).append(output.model_copy(deep=True))
    for (uid, session), outputs in sessions.items():
        asyncio.run(worker._agent_loop_postprocess(outputs, False, uid=uid, session_id=session, global_steps=1))
    return caught


class _Queue:
    """The TransferQueue calls verl's ``_compute_advantage`` makes, over what the worker put."""

    def __init__(self, fields: list[dict[str, Any]]) -> None:
        self.store, self.written = list_of_dict_to_tensordict(fields), {}

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> Any:
        return self.store.select(*[f for f in select_fields if f in self.store.keys()])

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: Any = None, **_: Any) -> Any:
        self.written.update({k: fields[k] for k in fields.keys()})
        return _meta(keys)


def _meta(keys: list[str]) -> KVBatchMeta:
    return KVBatchMeta(keys=keys, tags=[{"status": "success"}] * len(keys), partition_id="train")


def _trainer(estimator: str) -> ArlkitTrainer:
    trainer = object.__new__(ArlkitTrainer)  # the advantage step needs only the config
    trainer.config = OmegaConf.create({
        "algorithm": {"adv_estimator": estimator, "use_kl_in_reward": False, "gamma": 1.0, "lam": 1.0,
                      "norm_adv_by_std_in_grpo": True, "rollout_correction": None},
        "actor_rollout_ref": {"rollout": {"n": SESSIONS}},
    })
    return trainer


@pytest.mark.parametrize("name", ["arlkit_gigpo", "arlkit_empg"])
def test_the_trainer_mode_runs_verls_advantage_step_with_arlkits_estimator(
        name: str, played: dict[str, Any], tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, outputs = played["keys"], played["outputs"]
    fields = _worker_fields(played, tokenizer, monkeypatch)
    assert [f["extra_fields"]["reward_extra_info"]["score"] for f in fields] == [o.reward_score for o in outputs]
    generator = torch.Generator().manual_seed(5)
    for field in fields:  # what verl's old-log-prob step adds: the rollout policy's token entropies
        field["entropy"] = torch.rand(len(field["response_mask"]), generator=generator)
    queue = _Queue(fields)
    monkeypatch.setattr(trainer_base, "tq", queue)
    original = trainer_base.compute_advantage_for_multi_trajectories
    metrics: dict[str, Any] = {}
    _trainer(name)._compute_advantage(_meta(keys), metrics)
    assert trainer_base.compute_advantage_for_multi_trajectories is original  # swapped back
    mask, rewards = _verl_tensors(outputs)
    entropy = pad_rows([f["entropy"] for f in fields], mask.shape[1]) if name == "arlkit_empg" else None
    expected = step_advantages(name, keys, [o.extra_fields for o in outputs], mask, rewards, entropy=entropy,
                               algo_config=OmegaConf.create({"norm_adv_by_std_in_grpo": True})).advantages
    written = queue.written["advantages"].to_padded_tensor(padding=0.0)
    torch.testing.assert_close(written, expected.to(written.dtype), atol=1e-6, rtol=1e-6)
    assert any(key.startswith("arlkit/adv/") for key in metrics)


def test_other_estimators_run_verls_own_path(played: dict[str, Any], tokenizer: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the arlkit trainer mode another estimator is verl's path, untouched: here arlkit_grpo, the
    group-relative advantage over the step rows (every row with its trajectory's score)."""
    keys, outputs = played["keys"], played["outputs"]
    queue = _Queue(_worker_fields(played, tokenizer, monkeypatch))
    monkeypatch.setattr(trainer_base, "tq", queue)
    _trainer("arlkit_grpo")._compute_advantage(_meta(keys), {})
    mask, rewards = _verl_tensors(outputs)
    grpo = compute_advantage("grpo", AdvantageInputs(response_mask=mask, token_level_rewards=rewards,
                                                      index=[k.rsplit("_", 2)[0] for k in keys])).advantages
    torch.testing.assert_close(queue.written["advantages"].to_padded_tensor(padding=0.0), grpo, atol=1e-6, rtol=1e-6)


def test_import_verl_registers_the_trainer_modes_only_with_verls_trainer(run_child) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import sys, verl\n"
        "assert 'arlkit.integrations.verl_trainer' not in sys.modules and 'verl.trainer.ppo.v1' not in sys.modules\n"
        "from verl.trainer.ppo.v1 import get_trainer_cls\n"
        "print(*(get_trainer_cls(m).__module__ for m in ('arlkit', 'arlkit_colocate_async', 'arlkit_separate_async')))\n"
    )
    out = run_child([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stdout.split() == ["arlkit.integrations.verl_trainer"] * 3
    assert get_trainer_cls("arlkit") is ArlkitTrainer
