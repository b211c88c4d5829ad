"""The Gymnasium bridge's rules (``arlkit.envs.gymnasium``), on small fake Gymnasium environments
driven through the rollout engine: success only on ``terminated``, environments closed, ``Text``
charsets, the whole reply by option, the budget at reset, T_max from the spec, one-line errors."""

from __future__ import annotations

import gc
import logging
import string
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

gymnasium = pytest.importorskip("gymnasium")

from arlkit.config import load_config  # noqa: E402
from arlkit.envs import make  # noqa: E402
from arlkit.envs import bridge  # noqa: E402
from arlkit.envs.gymnasium import TRUNCATED_NOTE, from_gymnasium  # noqa: E402
from arlkit.envs.protocol import Task  # noqa: E402
from arlkit.policies.protocol import Reply  # noqa: E402
from arlkit.policies.registry import register_policy  # noqa: E402
from arlkit.recipes.eval import EvalConfig, run_eval  # noqa: E402
from arlkit.rollout import make_jobs, run_rollouts  # noqa: E402
from gymnasium import spaces  # noqa: E402

COUNTS: Counter[str] = Counter()


class FakeTextEnv(gymnasium.Env):
    """A text game that records what it is given: ``done`` terminates (reward 1); ``boom`` raises;
    ``MAX_TURNS`` steps end it GEM's way (terminated and truncated, partial reward)."""

    metadata = {"render_modes": []}
    MAX_TURNS = 3

    def __init__(self, fail_reset: bool = False, truncate_only: bool = False, success_flag: bool | None = None) -> None:
        COUNTS["made"] += 1
        self.observation_space = spaces.Text(max_length=500, charset=string.printable)
        self.action_space = spaces.Text(max_length=100)  # Gymnasium's default charset: letters and digits
        self.fail_reset, self.truncate_only, self.success_flag = fail_reset, truncate_only, success_flag
        self.turns = 0
        self.actions: list[str] = []
        self.options: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self.fail_reset:
            raise ConnectionError("the server\nhas gone away")
        self.turns, self.actions = 0, []
        self.options.append(options)
        return "Say done.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if "boom" in action:
            raise RuntimeError("the wrapped environment broke")
        self.turns += 1
        self.actions.append(action)
        info = {} if self.success_flag is None else {"success": self.success_flag}
        if action == "done":
            return "Done.", 1.0, True, False, info
        if self.turns >= self.MAX_TURNS:
            over = "You have reached the maximum number of turns."
            return over, 0.633, not self.truncate_only, True, info
        return f"Turn {self.turns}.", 0.1, False, False, info

    def close(self) -> None:
        COUNTS["closed"] += 1


gymnasium.register(id="arlkit-test/FakeText-v0", entry_point=FakeTextEnv, max_episode_steps=7)
gymnasium.register(id="arlkit-test/FakeTextNoLimit-v0", entry_point=FakeTextEnv)
gymnasium.register(id="arlkit-test/FakeTextSaysSuccess-v0", entry_point=FakeTextEnv, kwargs={"success_flag": True})


class Scripted:
    """Replies with the same text every turn."""

    context_length = None

    def __init__(self, text: str) -> None:
        self.name, self.text = "scripted", text

    def generate(self, requests: list[Any]) -> list[Reply]:
        return [Reply(self.text) for _ in requests]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    gc.collect()  # bridges an earlier test left in reference cycles close now, not during this test
    COUNTS.clear()
    bridge._warned.clear()  # warnings come once per process: each test sees its own


def _rollouts(reply: str, budget: int = 5, tasks: int = 2, samples: int = 2, env_id: str = "arlkit-test/FakeText-v0",
              **config: Any) -> list[Any]:
    probe = make("gymnasium", id=env_id, **config)
    jobs = make_jobs(probe.tasks("test", tasks), samples, budget, seed=0)
    probe.close()
    return run_rollouts(lambda: make("gymnasium", id=env_id, **config), jobs, Scripted(reply))


def test_a_truncated_game_with_partial_reward_is_no_success() -> None:
    for env_id in ("arlkit-test/FakeText-v0", "arlkit-test/FakeTextSaysSuccess-v0"):  # GEM's turn limit
        for trajectory in _rollouts("<action>wait</action>", env_id=env_id):
            last = trajectory.turns[-1]
            assert len(trajectory.turns) == FakeTextEnv.MAX_TURNS and last.reward == pytest.approx(0.633)
            assert not trajectory.success and trajectory.ended_by == "terminal"
            assert last.observation.endswith(TRUNCATED_NOTE)
    env = from_gymnasium("arlkit-test/FakeText-v0")
    env.reset(env.tasks("test", 1)[0], 0)
    assert env.step("done").success  # terminated alone, reward 1: success
    only = from_gymnasium(FakeTextEnv(truncate_only=True))
    only.reset(Task("t", {"seed": 0}), 0)
    results = [only.step("wait") for _ in range(3)]
    assert results[-1].done and not results[-1].success and results[-1].valid


def test_every_environment_made_is_closed_also_after_exceptions() -> None:
    trajectories = _rollouts("<action>done</action>", tasks=3, samples=2)
    assert all(t.success for t in trajectories) and len(trajectories) == 6
    assert COUNTS["made"] == COUNTS["closed"] == 7  # the probe and one per trajectory
    COUNTS.clear()
    broken = _rollouts("<action>boom</action>", budget=3)
    assert all(not t.success and t.ended_by == "budget" for t in broken)
    first = broken[0].turns[0]
    assert not first.valid and "RuntimeError: the wrapped environment broke" in first.observation
    assert "\n" not in first.observation.split("Invalid action: ")[1].split(".\n")[0]
    assert COUNTS["made"] == COUNTS["closed"] == 5


def test_an_eval_closes_every_environment_it_makes(tmp_path: Path) -> None:
    try:
        register_policy("arlkit-test-done")(lambda arg, sampling, backend: Scripted("<action>done</action>"))
    except ValueError:
        pass  # registered by an earlier run in this process
    config = load_config(EvalConfig, None, {"env": {"name": "gymnasium", "args": {"id": "arlkit-test/FakeText-v0"}},
                                            "policies": ["arlkit-test-done"], "tasks": 3, "samples": 2,
                                            "budgets": ["full", "50%"], "bootstrap": 100})
    run_eval(config, tmp_path / "ev")
    assert COUNTS["made"] == COUNTS["closed"] == 13  # the eval's probe and 3 tasks x 2 samples x 2 budgets


def test_a_failing_reset_is_an_error_observation_and_the_env_is_still_closed(caplog: pytest.LogCaptureFixture) -> None:
    env = from_gymnasium("arlkit-test/FakeText-v0", action_text="action")
    env._env.unwrapped.fail_reset = True
    with caplog.at_level(logging.WARNING, logger="arlkit.envs.gymnasium.env"):
        first = env.reset(env.tasks("test", 1)[0], 0)
    assert first == "The environment could not start: ConnectionError: the server has gone away"
    result = env.step("done")
    assert result.done and not result.success and not result.valid
    assert "ConnectionError" in caplog.text
    env.close()
    env.close()  # idempotent
    assert COUNTS["made"] == COUNTS["closed"] == 1


def test_a_closed_bridge_makes_a_fresh_environment_on_reset() -> None:
    env = from_gymnasium("arlkit-test/FakeText-v0")
    task = env.tasks("test", 1)[0]
    for _ in range(3):
        env.reset(task, 0)
        assert env.step("done").success
        env.close()
    assert env.closed and COUNTS["made"] == COUNTS["closed"] == 3
    dropped = from_gymnasium("arlkit-test/FakeText-v0")
    del dropped  # never closed by its user: closed when collected
    assert COUNTS["made"] == COUNTS["closed"] == 4


def test_text_actions_outside_the_charset_reach_the_env_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="arlkit.envs.gymnasium.env"):
        trajectories = _rollouts("<action>go north # now</action>", budget=2)
    assert all(turn.valid for t in trajectories for turn in t.turns)
    warnings = [r.getMessage() for r in caplog.records if "charset" in r.getMessage() or "rejects" in r.getMessage()]
    assert len(warnings) == 1 and "' ' '#'" in warnings[0] and "Text(1, 100" in warnings[0]
    strict = from_gymnasium("arlkit-test/FakeText-v0", text_check="full")
    strict.reset(strict.tasks("test", 1)[0], 0)
    refused = strict.step("go north # now")
    assert not refused.valid and "' ' '#'" in refused.observation
    assert not strict.step("x" * 101).valid  # the length still counts under text_check=length and full
    anything = from_gymnasium("arlkit-test/FakeText-v0", text_check="none")
    anything.reset(anything.tasks("test", 1)[0], 0)
    assert anything.step("x" * 101).valid


def test_the_whole_reply_or_only_the_action_by_option() -> None:
    reply = "<think>I am done.</think><action>done</action>"
    for action_text, expected in (("action", "done"), ("reply", reply)):
        env = from_gymnasium("arlkit-test/FakeText-v0", action_text=action_text)
        env.reset(env.tasks("test", 1)[0], 0)
        parsed = env.parse_action(reply)
        assert parsed.action == expected and parsed.strict_format
        env.step(parsed.action)
        assert env._env.unwrapped.actions == [expected]
    assert from_gymnasium("arlkit-test/FakeText-v0", action_text="reply").parse_action("  ").action is None
    with pytest.raises(ValueError, match="valid choices: action, reply"):
        from_gymnasium("arlkit-test/FakeText-v0", action_text="all")
    with pytest.raises(ValueError, match="action_text=reply needs a Text action space"):
        from_gymnasium("CartPole-v1", render="builtins:repr", action_text="reply")


def test_the_announced_budget_reaches_the_wrapped_env_at_reset() -> None:
    env = from_gymnasium("arlkit-test/FakeText-v0")
    task = env.tasks("test", 1)[0]
    env.reset(task, 0)
    env.set_budget(4)
    env.reset(task, 0)
    env.set_budget(None)  # hidden budget: nothing to tell
    env.reset(task, 0)
    assert env._env.unwrapped.options == [None, {"budget": 4, "remaining": 4, "t_max": 7}, None]
    with pytest.raises(ValueError, match="budget must be >= 1"):
        env.set_budget(0)


def test_t_max_comes_from_the_spec_or_the_option_else_50_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert from_gymnasium("arlkit-test/FakeText-v0").t_max == 7
    assert make("gymnasium", id="CartPole-v1", render="builtins:repr").t_max == 500
    given = from_gymnasium("arlkit-test/FakeText-v0", t_max=12)
    assert given.t_max == 12 and given._env.spec.max_episode_steps == 12  # Gymnasium's time limit agrees
    with caplog.at_level(logging.WARNING, logger="arlkit.envs.gymnasium.env"):
        assert from_gymnasium("arlkit-test/FakeTextNoLimit-v0").t_max == 50
        assert from_gymnasium(FakeTextEnv()).t_max == 50
    assert "no t_max given" in caplog.text and "give --env-arg t_max=N" in caplog.text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["id=Nope-v0"], "Nope"),
        (["id=no_such_module_xyz:Nope-v0"], "no_such_module_xyz"),
        (["id=CartPole-v9"], "v9"),
        (["id=CartPole-v1", "render=no_such_module_xyz:show"], "render=no_such_module_xyz:show"),
        (["id=arlkit/guess-number-v0", "action_text=all"], "valid choices: action, reply"),
    ],
)
def test_a_bad_gymnasium_id_is_one_line_and_exit_2(  # type: ignore[no-untyped-def]
        tmp_path: Path, args: list[str], needle: str, run_child) -> None:
    env_args = [part for arg in args for part in ("--env-arg", arg)]
    done = run_child([sys.executable, "-m", "arlkit", "eval", "--env", "gymnasium", *env_args, "--policy", "random",
                      "--tasks", "2", "--out", str(tmp_path / "ev")], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr and needle in lines[0], done.stderr[-2000:]
