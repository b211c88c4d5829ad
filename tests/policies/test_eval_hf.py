"""``arlkit eval --policy hf:DIR`` on FrozenLake: the same files as a scripted policy, a resumed run
regenerates exactly the trajectories it lost, and a chat that outgrows the context window ends."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

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


def test_a_chat_that_outgrows_the_context_window_ends_as_a_counted_failure(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The probe: an untrained model's full-history chat outgrows the model's positions. Here the
    # window is 600 tokens (a copy of the model with a small max_position_embeddings) and FrozenLake
    # runs 20 turns of ~100 tokens each: every trajectory must end at the window, none may hang.
    small = tmp_path / "small"
    shutil.copytree(tiny_model_dir, small)
    config = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 600}))
    args = ["eval", "--env", "frozenlake", "--env-arg", "size=4", "--env-arg", "t_max=20", "--tasks", "2",
            "--samples", "2", "--budgets", "100%", "--bootstrap", "100", "--temperature", "0"]
    out = tmp_path / "run"
    assert main([*args, "--policy", f"hf:{small}", "--out", str(out)]) == 0
    lines = _lines(out / "trajectories.jsonl")
    assert len(lines) == 4
    full = [t for t in lines if t["ended_by"] == "context_length_exceeded"]
    assert full and all(t["error"] is None and not t["success"] for t in full)
    assert all(0 < len(t["turns"]) < 20 for t in full)
    summary = (out / "summary.md").read_text()
    assert f"ended by the context window (`context_length_exceeded`, failures unless already solved): {len(full)}" in summary
    assert json.loads((out / "run.json").read_text())["sampling"]["max_new_tokens"] is None  # the model's 32

    # --context-length shrinks the window further: the chats end sooner
    capsys.readouterr()
    tighter = tmp_path / "tighter"
    assert main([*args, "--policy", f"hf:{small}", "--context-length", "400", "--out", str(tighter)]) == 0
    shorter = _lines(tighter / "trajectories.jsonl")
    assert len(shorter) == 4 and any(t["ended_by"] == "context_length_exceeded" for t in shorter)
    assert sum(len(t["turns"]) for t in shorter) < sum(len(t["turns"]) for t in lines)
