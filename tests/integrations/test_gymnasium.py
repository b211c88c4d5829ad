"""Gymnasium both ways: every arlkit env passes Gymnasium's env checker behind ``to_gymnasium`` and
the ``arlkit/<name>-v0`` ids; a Gymnasium text env runs through ``arlkit eval``."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

gymnasium = pytest.importorskip("gymnasium")

import arlkit.integrations.gymnasium  # noqa: E402
from arlkit.envs import list_envs, make  # noqa: E402
from arlkit.envs.checker import check_env as arlkit_check_env  # noqa: E402
from arlkit.envs.gymnasium import TRAIN_SEED_OFFSET, from_gymnasium  # noqa: E402
from arlkit.envs.protocol import Task  # noqa: E402
from arlkit.sandbox import available_levels  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

NAMESPACED = any(available_levels()[lv] is None for lv in ("unshare", "bwrap"))
SKIP = {"gymnasium"}  # the adapter the other way
OPTIONAL = {"bfcl": "bfcl_eval", "math-tir": "reasoning_gym", "webshop": "bm25s", "alfworld": "alfworld"}


def _wrappable(name: str) -> bool:
    if name in OPTIONAL:
        try:
            __import__(OPTIONAL[name])
        except ImportError:
            return False
    return name not in ("terminal",) or NAMESPACED


@pytest.mark.parametrize("name", [n for n in list_envs(plugins=False) if n not in SKIP])
def test_every_wrapped_arlkit_env_passes_gymnasiums_checker(name: str) -> None:
    if not _wrappable(name):
        pytest.skip(f"{name} needs what this machine lacks")
    env = arlkit.integrations.gymnasium.to_gymnasium(name, n_tasks=2, render_mode="ansi")
    check_env(env, skip_render_check=False)
    registered = gymnasium.make(f"arlkit/{name}-v0", n_tasks=2)
    observation, info = registered.reset(seed=3)
    again, _ = registered.reset(seed=3)
    assert observation == again and info["budget"] == make(name).t_max and "Turn budget" in info["system_prompt"]


def test_reset_options_pick_the_task_and_steps_carry_the_step_result() -> None:
    env = arlkit.integrations.gymnasium.to_gymnasium("frozenlake", size=4, slippery=False)
    task = env.tasks()[5]
    first, info = env.reset(seed=0, options={"task": task})
    assert info["task_id"] == task.task_id
    assert env.reset(options={"task": 5})[1]["task_id"] == task.task_id
    assert env.reset(options={"task": task.task_id})[1]["task_id"] == task.task_id
    _, reward, terminated, truncated, step_info = env.step("Nowhere")
    assert not step_info["valid"] and step_info["step_result"].valid is False and reward == 0.0
    replies = arlkit.integrations.gymnasium.to_gymnasium("frozenlake", parse_replies=True, budget=2)
    replies.reset(seed=1)
    assert replies.step("<think>x</think><action>Down</action>")[4]["valid"]
    out = replies.step("<think>x</think><action>Down</action>")
    assert out[2] or out[3]  # terminated, or truncated at the budget of 2
    with pytest.raises(ValueError, match="unknown task"):
        env.reset(options={"task": "nope"})


def test_a_gymnasium_text_env_becomes_an_arlkit_env() -> None:
    env = from_gymnasium("arlkit/guess-number-v0")
    report = arlkit_check_env(env)
    assert not report.problems
    test, train = env.tasks("test", 3), env.tasks("train", 3)
    assert train[0].payload["seed"] == TRAIN_SEED_OFFSET and test[0].payload["seed"] == 0
    env.reset(test[0], 0)
    low, high = 1, 100
    for _ in range(10):  # binary search on the hints: solved within 7 guesses
        guess = (low + high) // 2
        result = env.step(str(guess))
        if result.done:
            break
        low, high = (guess + 1, high) if "higher" in result.observation else (low, guess - 1)
    assert result.success and result.reward == 1.0
    assert not env.step("3").valid  # over
    env.reset(test[0], 0)
    passed = env.step("forty")  # outside the Text space's charset: the environment still gets it
    assert passed.valid and "not a number" in passed.observation and not passed.done
    strict = from_gymnasium("arlkit/guess-number-v0", text_check="full")
    strict.reset(test[0], 0)
    key = strict.state_key()
    assert not strict.step("forty").valid and strict.state_key() == key  # text_check=full: refused
    discrete = from_gymnasium(gymnasium.make("CartPole-v1"), render="builtins:repr")
    assert discrete.admissible_actions() == ["0", "1"]
    discrete.reset(Task("c", {"seed": 0}), 0)
    assert discrete.step("1").valid and not discrete.step("7").valid and not discrete.step("left").valid


def test_arlkit_eval_runs_on_a_gymnasium_env(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    base = [sys.executable, "-m", "arlkit", "eval", "--env", "gymnasium", "--policy", "random", "--tasks", "3",
            "--samples", "2", "--budgets", "full", "--bootstrap", "100"]
    done = run_child([*base, "--out", str(tmp_path / "ev"), "--env-arg", "id=arlkit/guess-number-v0"],
                     capture_output=True, text=True)
    assert done.returncode == 2 and "needs an environment with a finite action set" in done.stderr, (  # Text actions
        done.stderr[-2000:])
    done = run_child([*base, "--out", str(tmp_path / "cp"), "--env-arg", "id=CartPole-v1",
                      "--env-arg", "render=builtins:repr"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "cp" / "passkt.csv")))
    assert rows and rows[0]["env"] == "gymnasium" and rows[0]["n_tasks"] == "3"
    module = tmp_path / "bisect_policy.py"
    module.write_text(BISECT)
    done = run_child([sys.executable, "-c", RUN_EVAL.format(out=tmp_path / "ev2")], capture_output=True, text=True,
                     cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "ev2" / "passkt.csv")))
    assert rows and all(float(r["pass"]) == 1.0 for r in rows if r["k"] == "1" and r["policy"] == "bisect")


BISECT = '''
from arlkit.policies.protocol import Reply


class Bisect:
    """Binary search on the game's hints (a scripted policy for the test)."""

    name = "bisect"
    context_length = None

    def generate(self, requests):
        out = []
        for request in requests:
            low, high = 1, 100
            for message in request.messages:
                text = message["content"]
                if message["role"] == "user" and "too low" in text:
                    low = int(text.split()[0]) + 1
                elif message["role"] == "user" and "too high" in text:
                    high = int(text.split()[0]) - 1
            out.append(Reply(f"<think>bisect</think><action>{(low + high) // 2}</action>"))
        return out
'''

RUN_EVAL = '''
from arlkit.config import load_config
from arlkit.policies.registry import register_policy
from arlkit.recipes.eval import EvalConfig, run_eval
from bisect_policy import Bisect

register_policy("bisect")(lambda arg, sampling, backend: Bisect())
config = load_config(EvalConfig, None, {{"env": {{"name": "gymnasium", "args": {{"id": "arlkit/guess-number-v0"}}}},
                                        "policies": ["bisect"], "tasks": 5, "samples": 1, "budgets": ["full"],
                                        "bootstrap": 100}})
run_eval(config, "{out}")
'''
