"""``arlkit export``: trajectories as parquet / a Hugging Face dataset, read back with ``datasets``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arlkit.config import EnvSpec
from arlkit.envs import make
from arlkit.recipes.eval import EvalConfig, run_eval
from arlkit.rollout.records import read_trajectories

datasets = pytest.importorskip("datasets", reason="the export extra is not installed (pip install 'arlkit[export]')")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    run_eval(EvalConfig(env=EnvSpec("frozenlake", {"t_max": 12}), policies=("oracle", "random"), tasks=3, samples=2,
                        budgets=("50%", "100%"), bootstrap=100), out)  # fmt: skip
    return out


def _export(run_child, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return run_child([sys.executable, "-m", "arlkit", "export", *args], capture_output=True, text=True)


def test_parquet_and_hf_round_trips(  # type: ignore[no-untyped-def]
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_child) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = read_trajectories(run / "trajectories.jsonl")
    n_turns = sum(len(t.turns) for t in source)
    proc = _export(run_child, str(run), "--out", str(tmp_path / "pq"))
    assert proc.returncode == 0 and f"exported {len(source)} trajectories and {n_turns} turns" in proc.stdout, (
        proc.stdout + proc.stderr)
    cache = str(tmp_path / "cache")  # datasets reads HF_DATASETS_CACHE at import: name the cache, or an old one is read
    trajectories = datasets.load_dataset(str(tmp_path / "pq"), "trajectories", split="train", cache_dir=cache)
    turns = datasets.load_dataset(str(tmp_path / "pq"), "turns", split="train", cache_dir=cache)
    assert len(trajectories) == len(source) == 24 and len(turns) == n_turns
    first, row = source[0], trajectories[0]
    assert row["id"] == f"{first.policy}|{first.task_id}|{first.budget}|{first.sample}" and row["success"] == first.success
    # every message the policy saw: the system prompt of its last request (instruction, budget), then the chat
    env = make("frozenlake", t_max=12)
    env.reset(next(t for t in env.tasks("test", 3) if t.task_id == first.task_id), first.env_seed)
    n = len(first.turns)
    system = row["messages"][0]
    assert system["role"] == "system" and env.prompt_text().instruction in system["content"]
    assert f"Turn budget: {first.budget} turns in total, {n - 1} completed, {first.budget - n + 1} remaining." in system["content"]
    assert row["messages"][1] == {"role": "user", "content": first.initial_observation}
    assert row["messages"][2] == {"role": "assistant", "content": first.turns[0].reply}
    assert row["messages"][-1] == {"role": "user", "content": first.turns[-1].observation}
    assert len(row["messages"]) == 2 + 2 * n and row["actions"] == [x.action for x in first.turns]
    assert sum(r["success"] for r in trajectories) == sum(t.success for t in source)
    assert {r["policy"] for r in turns} == {"oracle", "random"} and all(r["remaining"] >= 1 for r in turns)
    proc = _export(run_child, str(run), "--format", "hf", "--out", str(tmp_path / "hf"))
    assert proc.returncode == 0, proc.stderr
    again = datasets.load_from_disk(str(tmp_path / "hf" / "turns"))
    assert len(again) == n_turns and again[0]["reply"] == source[0].turns[0].reply


def test_bad_input_is_one_line(run: Path, tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    for args, message in (([str(tmp_path), "--out", str(tmp_path / "o")], "no trajectories.jsonl"),
                          ([str(run), "--out", str(tmp_path / "full")], "is not an empty folder"),
                          ([str(run), "--format", "csv", "--out", str(tmp_path / "o")], "invalid choice: 'csv'")):  # fmt: skip
        proc = _export(run_child, *args)
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
