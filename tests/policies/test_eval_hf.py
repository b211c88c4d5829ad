"""``arlkit eval --policy hf:DIR`` on FrozenLake: the same files as a scripted policy, and a resumed
run regenerates exactly the trajectories it lost."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from arlkit.cli import main

ARGS = ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--env-arg", "t_max=6", "--tasks", "2",
        "--samples", "2", "--budgets", "50%,100%", "--bootstrap", "100", "--max-new-tokens", "8"]


def _lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_eval_with_an_hf_policy_writes_what_scripted_policies_write(tiny_model_dir: Path, tmp_path: Path) -> None:
    scripted, model = tmp_path / "scripted", tmp_path / "hf"
    assert main([*ARGS, "--policy", "random", "--out", str(scripted)]) == 0
    assert main([*ARGS, "--policy", f"hf:{tiny_model_dir}", "--out", str(model)]) == 0

    assert sorted(p.name for p in scripted.iterdir()) == sorted(p.name for p in model.iterdir())
    a, b = _lines(scripted / "trajectories.jsonl"), _lines(model / "trajectories.jsonl")
    assert len(a) == len(b) == 2 * 2 * 2
    assert {tuple(sorted(t)) for t in a} == {tuple(sorted(t)) for t in b}
    assert {(t["task_id"], t["sample"], t["budget"]) for t in a} == {(t["task_id"], t["sample"], t["budget"]) for t in b}
    assert all(t["policy"] == f"hf:{tiny_model_dir}" and t["error"] is None and t["turns"] for t in b)
    rows_a, rows_b = _csv(scripted / "passkt.csv"), _csv(model / "passkt.csv")
    assert [(r["T"], r["k"]) for r in rows_a] == [(r["T"], r["k"]) for r in rows_b]
    assert json.loads((model / "run.json").read_text())["sampling"]["max_new_tokens"] == 8

    # Resume: drop half of the finished trajectories; the re-run regenerates them identically.
    path = model / "trajectories.jsonl"
    full = path.read_text().splitlines(keepends=True)
    path.write_text("".join(full[: len(full) // 2]))
    assert main([*ARGS, "--policy", f"hf:{tiny_model_dir}", "--out", str(model)]) == 0
    assert sorted(path.read_text().splitlines()) == sorted(line.rstrip("\n") for line in full)
