"""``configs/gigpo_alfworld.yaml`` (GiGPO with ARLArena's ALFWorld conventions) passes ``arlkit train --check``.
(One RL step on alfworld runs in tests/train/test_train_sandbox_envs.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("alfworld")


def test_the_alfworld_config_checks(tmp_path: Path, run_child) -> None:  # type: ignore[no-untyped-def]
    config = Path(__file__).resolve().parents[2] / "configs" / "gigpo_alfworld.yaml"
    done = run_child([sys.executable, "-m", "arlkit", "train", "--config", str(config), "--out", str(tmp_path / "run"),
                      "--check"], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    checked = json.loads(done.stdout)["config"]
    assert checked["algo"]["preset"] == "gigpo" and checked["env"]["name"] == "alfworld" and checked["prompt"]["history"] == 2
    assert checked["reward"] == {"success_reward": 10.0, "invalid_action_penalty": 0.1, "strict_format": True}
