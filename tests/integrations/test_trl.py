"""TRL's GRPOTrainer on arlkit environments: the environment class TRL builds, the rows, a forced
tool call through TRL's own tool loop, and the example training 2 steps on a CPU."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

trl = pytest.importorskip("trl")

from arlkit.integrations.trl import environment_factory, trl_dataset, use_tool_chat_template  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EASY = {"size": 3, "slippery": False, "t_max": 8}


def test_the_environment_class_has_one_tool_and_enforces_the_budget() -> None:
    cls = environment_factory("frozenlake", **EASY)
    public = [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))]
    assert sorted(public) == ["act", "get_reward", "reset"]  # TRL exposes act; reset and get_reward are its hooks
    rows = trl_dataset("frozenlake", n=6, budget=[2, 5], seed=1, **EASY)
    assert {r["budget"] for r in rows} <= {2, 5} and len({r["budget"] for r in rows}) == 2
    row = next(r for r in rows if r["budget"] == 2)
    assert "budget of 2 turns" in row["prompt"][0]["content"] and row["prompt"][-1]["role"] == "user"
    env = cls()
    first = env.reset(**row)
    assert "[Turns: 0 completed, 2 remaining of 2]" in first
    env.act("Nowhere")  # invalid: still a turn
    second = env.act("Nowhere")
    assert second.endswith("The episode is over.") and env.turns == 2
    assert env.act("Down") == "The episode is over: no more turns." and env.get_reward() == 0.0


def test_solving_through_act_earns_the_reward() -> None:
    from arlkit.envs import make
    from arlkit.envs.protocol import Task

    cls = environment_factory("frozenlake", **EASY)
    row = trl_dataset("frozenlake", n=1, budget=8, **EASY)[0]
    probe = make("frozenlake", **EASY)
    probe.reset(Task(row["task_id"], json.loads(row["task_payload"])), row["seed"])
    env = cls()
    env.reset(**row)
    while not env.success:
        action = probe.optimal_actions(8 - env.turns)[0]
        probe.step(action)
        env.act(action)
    assert env.get_reward() == 1.0


def test_a_tool_call_runs_through_trls_loop_into_the_environment(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arlkit.rollout.corpus import init_tiny_model

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    nano = init_tiny_model("nano", tmp_path / "nano", seed=0)
    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(nano))
    assert trl.chat_template_utils.supports_tool_calling(tokenizer)

    class ScriptedFirstTurn(trl.GRPOTrainer):
        """The untrained model never calls a tool: each of its turns is replaced by a call of act (TRL 1.16's
        generation hook), bounded by max_tool_calling_iterations."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            completions, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
            call = '<tool_call>\n{"name": "act", "arguments": {"action": "Down"}}\n</tool_call><|im_end|>'
            return [self._tokenizer(call, add_special_tokens=False)["input_ids"] for _ in completions], logprobs

    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, fp16=False, per_device_train_batch_size=4,
        num_generations=2, max_completion_length=64, max_tool_calling_iterations=2, max_steps=1, logging_steps=1,
        save_strategy="no", report_to="none", gradient_checkpointing=False, dataloader_num_workers=0, seed=0,
    )
    trainer = ScriptedFirstTurn(model=AutoModelForCausalLM.from_pretrained(nano, dtype=torch.float32), args=config,
                                train_dataset=trl_dataset("frozenlake", n=4, budget=4, **EASY), processing_class=tokenizer,
                                environment_factory=environment_factory("frozenlake", **EASY))
    assert [t.__name__ for t in trainer.tools] == ["act"]
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0
    assert all(env.turns >= 1 for env in trainer.environments)  # act ran in arlkit's environment
    assert "rewards/arlkit_frozenlake/mean" in logged


def test_the_example_trains_two_steps_on_a_cpu(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    done = run_child([sys.executable, str(ROOT / "examples" / "trl_grpo_frozenlake.py"), "--steps", "2", "--tasks", "4",
                      "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "trained 2 steps" in done.stdout and (tmp_path / "run" / "model" / "model.safetensors").exists()
