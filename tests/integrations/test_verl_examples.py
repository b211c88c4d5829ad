"""The launchers in examples/verl compose into a configuration verl 0.9.1 accepts (``DRY_RUN=1``: verl's
Hydra config with every override applied, then verl's own ``validate_config``), with arlkit's agent
loop, estimator, loss and trainer mode in it, and data files the agent loop can play. No GPU needed:
nothing is trained."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is installed by `make test` (Makefile: VERL_PIN)")
import yaml  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import validate_config  # noqa: E402

from arlkit.integrations.verl_agent import AGENT_LOOP_CONFIG  # noqa: E402
from arlkit.integrations.verl_data import audit_data, read_rows, row_episode  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "verl"
CASES = [  # launcher, model size, estimator, trainer mode, layout
    ("run_budgetmix_frozenlake.sh", "0.6b", "arlkit_gigpo", "arlkit", "step"),
    ("run_budgetmix_frozenlake.sh", "4b", "arlkit_gigpo", "arlkit", "step"),
    ("run_budgetmix_sokoban.sh", "0.6b", "arlkit_gigpo", "arlkit", "step"),
    ("run_budgetmix_sql.sh", "0.6b", "arlkit_grpo", "sync", "trajectory"),
]


@pytest.mark.parametrize(("script", "size", "estimator", "mode", "layout"), CASES)
def test_launcher_composes_a_valid_verl_config(  # type: ignore[no-untyped-def]
        script: str, size: str, estimator: str, mode: str, layout: str, tmp_path: Path, run_child) -> None:
    env = {**os.environ, "DRY_RUN": "1", "MODEL_SIZE": size, "ROWS": "8", "VAL_ROWS": "4",
           "DATA_DIR": str(tmp_path), "PYTHON": sys.executable}
    out = run_child(["bash", str(EXAMPLES / script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    config = OmegaConf.create(yaml.safe_load(out.stdout))
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert config.algorithm.adv_estimator == estimator and config.trainer.v1.trainer_mode == mode
    assert config.actor_rollout_ref.actor.policy_loss.loss_mode == "arlkit_vanilla"
    assert Path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path) == AGENT_LOOP_CONFIG
    for name in ("train", "val"):
        path = tmp_path / f"{name}.parquet"
        assert audit_data(path).passed
        assert {row_episode(r["extra_info"]).layout for r in read_rows(path)} == {layout}
