"""Plugins (docs/integrations.md#plugins): an environment and a policy kind from a separate package,
found through its distribution's entry points (``arlkit.envs``, ``arlkit.policies``) or named by
``module:factory``, are listed with where they come from and run under ``arlkit eval``; a broken
plugin is one line, exit 2."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = '''
from dataclasses import dataclass

from arlkit.envs import ParsedAction, PromptText, StepResult, Task
from arlkit.policies import Reply


@dataclass(frozen=True)
class CountdownConfig:
    start: int = 3
    t_max: int = 6


class Countdown:
    """Say "down" until the counter reaches zero; anything else is an invalid action."""

    name = "countdown"

    def __init__(self, config: CountdownConfig) -> None:
        self.config, self.t_max, self.left = config, config.t_max, 0

    def tasks(self, split, n):
        return [Task(f"{split}-{i}", {"start": self.config.start + i % 2}) for i in range(n)]

    def reset(self, task, seed):
        self.left = int(task.payload["start"])
        return f"count: {self.left}"

    def parse_action(self, reply):
        text = reply.split("<action>")[-1].split("</action>")[0].strip() if "<action>" in reply else ""
        return ParsedAction(text or None, None if text else "no <action> tag", bool(text))

    def step(self, action):
        if action != "down":
            return StepResult(f"{action!r} is not an action; say down", 0.0, False, False, False)
        self.left -= 1
        return StepResult(f"count: {self.left}", float(self.left == 0), self.left == 0, self.left == 0, True)

    def render(self):
        return f"count: {self.left}"

    def prompt_text(self):
        return PromptText("Count down to zero.", "<action>down</action>")


class Down:
    name = "always-down"

    def generate(self, requests):
        return [Reply("<action>down</action>") for _ in requests]


def always_down(arg, sampling, backend):
    return Down()


def broken(config: CountdownConfig):
    raise RuntimeError("never built")
'''

ENTRY_POINTS = """
[arlkit.envs]
countdown = arlkit_plugin_demo:Countdown

[arlkit.policies]
always-down = arlkit_plugin_demo:always_down
"""


@pytest.fixture()
def plugin_site(tmp_path: Path) -> Path:
    """A folder on ``PYTHONPATH`` holding the plugin package and its distribution's metadata, as
    ``pip install`` of a separate package would leave them."""
    site = tmp_path / "site"
    (site / "arlkit_plugin_demo").mkdir(parents=True)
    (site / "arlkit_plugin_demo" / "__init__.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    _distribution(site, "arlkit-plugin-demo", ENTRY_POINTS)
    return site


def _distribution(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")


def _arlkit(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "arlkit", *args], capture_output=True, text=True, env=env)


def test_entry_point_plugins_are_listed_with_their_distribution(plugin_site: Path) -> None:
    envs = _arlkit(plugin_site, "eval", "--list-envs")
    assert envs.returncode == 0, envs.stderr
    rows = dict(line.split(None, 1) for line in envs.stdout.splitlines())
    assert rows["countdown"] == "entry point arlkit.envs: arlkit_plugin_demo:Countdown (arlkit-plugin-demo 0.1)"
    assert rows["frozenlake"] == "arlkit.envs.frozenlake.env" and not envs.stderr
    policies = _arlkit(plugin_site, "eval", "--list-policies")
    assert "always-down  " in policies.stdout and "(arlkit-plugin-demo 0.1)" in policies.stdout


def test_a_plugin_named_like_a_built_in_is_ignored_with_one_line(plugin_site: Path) -> None:
    _distribution(plugin_site, "arlkit-plugin-clash", "[arlkit.envs]\nfrozenlake = arlkit_plugin_demo:Countdown\n")
    envs = _arlkit(plugin_site, "eval", "--list-envs")
    rows = dict(line.split(None, 1) for line in envs.stdout.splitlines())
    assert envs.returncode == 0 and rows["frozenlake"] == "arlkit.envs.frozenlake.env"
    assert envs.stderr == ("arlkit eval: warning: entry point frozenlake = arlkit_plugin_demo:Countdown "
                           "(arlkit-plugin-clash 0.1) ignored: arlkit has a built-in environment of that name\n")


@pytest.mark.parametrize(("env", "policy"), [("countdown", "always-down"),
                                             ("arlkit_plugin_demo:Countdown", "arlkit_plugin_demo:always_down")])
def test_a_plugin_env_and_policy_run_under_eval(plugin_site: Path, tmp_path: Path, env: str, policy: str) -> None:
    out = tmp_path / "run"
    done = _arlkit(plugin_site, "eval", "--env", env, "--env-arg", "start=3", "--policy", policy,
                   "--tasks", "4", "--samples", "2", "--budgets", "50%,100%", "--out", str(out))
    assert done.returncode == 0, done.stderr
    with open(out / "passkt.csv", newline="") as handle:
        rows = {(r["policy"], r["T"], r["k"]): float(r["pass"]) for r in csv.DictReader(handle)}
    # T_max 6: at 50% (3 turns) the starts of 3 are reached and the starts of 4 are not; at 100% all are
    assert rows[(policy, "3", "1")] == pytest.approx(0.5) and rows[(policy, "6", "1")] == 1.0
    # the typed config reached the plugin: an unknown key is refused naming the valid ones
    bad = _arlkit(plugin_site, "eval", "--env", env, "--env-arg", "begin=3", "--policy", policy, "--out",
                  str(tmp_path / "bad"))
    assert bad.returncode == 2 and "begin" in bad.stderr and "start" in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.parametrize(("env", "message"), [
    ("arlkit_plugin_nowhere:Env", "cannot import 'arlkit_plugin_nowhere' (ModuleNotFoundError"),
    ("arlkit_plugin_demo:Missing", "module 'arlkit_plugin_demo' has no 'Missing'"),
    ("arlkit_plugin_demo:Down", "environment 'arlkit_plugin_demo:Down' built a Down, which is not an environment: "
                                "it lacks t_max, tasks, reset, parse_action, step, render, prompt_text"),
    ("arlkit_plugin_demo:always_down", "its config class is unknown"),
])
def test_a_plugin_that_cannot_be_used_is_one_line_exit_2(plugin_site: Path, tmp_path: Path, env: str,
                                                         message: str) -> None:
    done = _arlkit(plugin_site, "eval", "--env", env, "--policy", "arlkit_plugin_demo:always_down", "--out",
                   str(tmp_path / "run"))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert done.stderr.startswith("arlkit eval: error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


SELF_REGISTERING = '''
from arlkit.envs.registry import register_env
from arlkit_plugin_demo import Countdown, CountdownConfig


@register_env("countup", CountdownConfig)
def make_countup(config):
    return Countdown(config)
'''


def test_a_self_registering_plugin_imported_first_is_still_its_entry_point(plugin_site: Path) -> None:
    """Importing a plugin's module before arlkit lists its plugins registers the name by its module; the
    listing that follows finds the same module behind the entry point: no warning, the entry point named."""
    (plugin_site / "arlkit_plugin_up.py").write_text(textwrap.dedent(SELF_REGISTERING), encoding="utf-8")
    _distribution(plugin_site, "arlkit-plugin-up", "[arlkit.envs]\ncountup = arlkit_plugin_up\n")
    code = ("import warnings; warnings.simplefilter('error'); import arlkit_plugin_up; "
            "from arlkit.envs.registry import ENVS, make; print(ENVS.source('countup')); print(make('countup').name)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["entry point arlkit.envs: arlkit_plugin_up (arlkit-plugin-up 0.1)", "countdown"]
    listed = _arlkit(plugin_site, "eval", "--list-envs")  # loaded through its entry point: the same source
    rows = dict(line.split(None, 1) for line in listed.stdout.splitlines())
    assert rows["countup"] == "entry point arlkit.envs: arlkit_plugin_up (arlkit-plugin-up 0.1)", listed.stderr
