"""Presets, registries, dynamic filtering and reward helpers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arlkit.algos import (
    POLICY_LOSSES,
    PRESETS,
    AlgoConfig,
    CISPOConfig,
    FilterConfig,
    GiGPOConfig,
    GSPOConfig,
    Registry,
    VanillaConfig,
    classify_step,
    episode_reward,
    filter_groups,
    get_preset,
    is_uniform_group,
    list_presets,
    override,
    step_rewards,
)
from arlkit.config import ConfigError

PROPS = settings(max_examples=50, deadline=None)

# docs/algorithms.md#presets: preset -> (adv_estimator, policy_loss, loss_agg_mode, dynamic_filtering, needs_critic, step_rows)
TABLE = {
    "grpo": ("grpo", "vanilla", "token-mean", False, False, False),
    "drgrpo": ("grpo", "vanilla", "seq-mean-token-sum-norm", False, False, False),
    "rloo": ("rloo", "vanilla", "token-mean", False, False, False),
    "gigpo": ("gigpo", "vanilla", "token-mean", False, False, True),
    "ppo": ("gae", "vanilla", "token-mean", False, True, False),
    "gspo": ("grpo", "gspo", "seq-mean-token-mean", False, False, False),
    "cispo": ("grpo", "cispo", "token-mean", False, False, False),
    "sapo": ("grpo", "sapo", "seq-mean-token-mean", False, False, False),
    "empg": ("empg", "vanilla", "token-mean", False, False, True),
    "dapo": ("grpo", "vanilla", "token-mean", True, False, False),
    "sampo": ("gigpo", "gspo", "seq-mean-token-mean", True, False, True),
}


def test_every_preset_matches_the_spec_table() -> None:
    assert list_presets() == sorted(TABLE)
    for name, (adv, loss, agg, filtering, critic, steps) in TABLE.items():
        cfg = get_preset(name)
        got = (cfg.adv_estimator, cfg.policy_loss, cfg.loss_agg_mode, cfg.dynamic_filtering, cfg.needs_critic,
               cfg.step_rows)
        assert got == (adv, loss, agg, filtering, critic, steps), name
        assert cfg.preset == name
        assert cfg.kl_penalty == "low_var_kl" and cfg.use_kl_loss
        assert PRESETS[name].description


def test_preset_specific_settings() -> None:
    assert get_preset("grpo").loss_config == VanillaConfig()  # eps 0.2 / 0.2, c = 3
    assert get_preset("grpo").adv_config.norm_adv_by_std_in_grpo
    assert not get_preset("drgrpo").adv_config.norm_adv_by_std_in_grpo
    assert get_preset("dapo").loss_config.clip_ratio_high == 0.28
    assert get_preset("cispo").loss_config == CISPOConfig(clip_ratio_low=1.0)
    assert get_preset("ppo").cliprange_value == 0.5
    assert get_preset("ppo").adv_config.gamma == 1.0 and get_preset("ppo").adv_config.lam == 1.0
    assert get_preset("gigpo").adv_config == GiGPOConfig(gamma=0.95, step_advantage_w=1.0)
    assert isinstance(get_preset("sampo").loss_config, GSPOConfig)
    assert get_preset("empg").adv_config.zeta == 0.05


def test_overrides_field_by_field_with_coercion() -> None:
    cfg = get_preset("grpo", clip_ratio_high=0.28)
    assert cfg.loss_config.clip_ratio_high == 0.28 and cfg.loss_config.clip_ratio_low == 0.2
    cfg = get_preset("cispo", sequence_mask="true", seq_mask_delta="3e-3")
    assert cfg.loss_config.sequence_mask and cfg.loss_config.seq_mask_delta == 0.003
    cfg = get_preset("gigpo", gamma="0.9", kl_coef="0.05", max_tries="2", cold_start_steps=15)
    assert cfg.adv_config.gamma == 0.9 and cfg.kl_coef == 0.05
    assert cfg.filter_config == FilterConfig(max_tries=2, cold_start_steps=15)
    # switching the loss starts it from its defaults and adopts its fixed aggregation
    cfg = get_preset("dapo", policy_loss="gspo")
    assert cfg.loss_config == GSPOConfig() and cfg.loss_agg_mode == "seq-mean-token-mean"
    assert override(cfg, entropy_coeff=0.001).entropy_coeff == 0.001
    gae = get_preset("grpo", adv_estimator="gae")
    assert gae.adv_config.lam == 1.0 and gae.needs_critic  # the estimator's registry flag: a value model


@pytest.mark.parametrize(
    ("name", "overrides", "field", "hint"),
    [
        ("gspo", {"sequence_mask": True}, "sequence_mask", "vanilla, cispo, sapo"),
        ("sampo", {"seq_mask_delta": 0.01}, "seq_mask_delta", "vanilla, cispo, sapo"),
        ("grpo", {"needs_critic": True}, "needs_critic", "valid keys"),
        ("grpo", {"policy_loss": "ppo_clip"}, "policy loss", "cispo, gspo, sapo, vanilla"),
        ("grpo", {"adv_estimator": "grpo2"}, "advantage estimator", "gigpo"),
        ("gspo", {"loss_agg_mode": "token-mean"}, "loss_agg_mode", "seq-mean-token-mean"),
        ("grpo", {"loss_agg_mode": "mean"}, "loss_agg_mode", "token-mean"),
        ("grpo", {"kl_penalty": "k4"}, "kl_penalty", "low_var_kl"),
        ("grpo", {"adv_estimator": "gigpo"}, "step_rows", "step_rows=True"),
        ("grpo", {"clip_ratio_c": 1.0}, "clip_ratio_c", "> 1"),
        ("grpo", {"gamma": 0.9}, "gamma", "gigpo"),
        ("grpo", {"max_tries": 0}, "max_tries", ">= 1"),
        ("grpo", {"kl_coef": -1}, "kl_coef", ">= 0"),
        ("grpo", {"nonsense": 1}, "nonsense", "valid keys"),
    ],
)
def test_invalid_combinations_are_rejected_clearly(name: str, overrides: dict, field: str, hint: str) -> None:
    with pytest.raises(ValueError) as info:
        get_preset(name, **overrides)
    assert isinstance(info.value, ConfigError)
    assert field in str(info.value) and hint in str(info.value)


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="dapo, drgrpo"):
        get_preset("grpo++")


def test_direct_construction_is_validated_too() -> None:
    assert AlgoConfig().loss_config == VanillaConfig()
    with pytest.raises(ValueError, match="loss_config"):
        AlgoConfig(policy_loss="gspo", loss_config=VanillaConfig(), loss_agg_mode="seq-mean-token-mean")


def test_config_round_trips_through_json() -> None:
    for name in list_presets():
        cfg = get_preset(name, entropy_coeff=0.01)
        data = json.loads(json.dumps(cfg.to_dict()))
        assert AlgoConfig.from_section(data) == cfg


def test_registry_contract() -> None:
    reg: Registry = Registry("widget")
    reg.register("a")(lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: None)
    with pytest.raises(ValueError, match="valid choices: a"):
        reg.get("b")
    assert POLICY_LOSSES.get("gspo").flags.agg_mode == "seq-mean-token-mean"


# --------------------------------------------------------------------------------------------------------------------
# Dynamic filtering


def test_filter_drops_uniform_groups_and_asks_for_more() -> None:
    # need 4; groups 0 and 2 are uniform -> keep 1, 3, 4 ; one short -> resample 1
    rounds = [[1, 0, 1], [0, 0, 0], [1, 1, 0], [0, 1], [1, 1]]
    d = filter_groups(rounds, num_needed=4, attempt=1, training_step=20, config=FilterConfig())
    assert d.keep == (True, False, True, True, False)
    assert (d.num_uniform, d.num_dropped, d.num_to_resample, d.done, d.num_filled) == (2, 2, 1, False, 0)


def test_filter_stops_when_full_and_counts_surplus() -> None:
    d = filter_groups([[1, 0], [0, 1], [0, 1], [0, 0]], num_needed=2, attempt=1, training_step=0, config=FilterConfig())
    assert d.keep == (True, True, False, False)
    assert (d.done, d.num_to_resample, d.num_surplus, d.num_dropped) == (True, 0, 1, 1)


def test_filter_last_try_fills_with_uniform_groups() -> None:
    # last try (attempt == max_tries = 2): 1 informative + 2 uniform fill the 3 missing slots
    d = filter_groups([[0, 0], [1, 0], [1, 1], [1, 1]], num_needed=3, attempt=2, training_step=5,
                      config=FilterConfig(max_tries=2))
    assert d.keep == (True, True, True, False)
    assert (d.done, d.num_filled, d.num_dropped, d.num_to_resample) == (True, 2, 1, 0)


def test_filter_cold_start_keeps_everything() -> None:
    cfg = FilterConfig(cold_start_steps=15)
    d = filter_groups([[0, 0], [1, 1], [1, 0]], num_needed=3, attempt=1, training_step=14, config=cfg)
    assert d.keep == (True, True, True) and d.done and not d.filtering_active and d.num_dropped == 0
    d = filter_groups([[0, 0], [1, 1], [1, 0]], num_needed=3, attempt=1, training_step=15, config=cfg)
    assert d.keep == (False, False, True) and d.filtering_active and d.num_to_resample == 2


def test_filter_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="attempt"):
        filter_groups([[1]], num_needed=1, attempt=4, training_step=0, config=FilterConfig(max_tries=3))
    with pytest.raises(ValueError, match="max_tries"):
        FilterConfig(max_tries=0)


@PROPS
@given(
    groups=st.lists(st.lists(st.sampled_from([0.0, 1.0, -0.1]), min_size=1, max_size=4), max_size=12),
    needed=st.integers(0, 12), attempt=st.integers(1, 3), step=st.integers(0, 30),
)
def test_filter_invariants(groups: list[list[float]], needed: int, attempt: int, step: int) -> None:
    cfg = FilterConfig(max_tries=3, cold_start_steps=10)
    d = filter_groups(groups, num_needed=needed, attempt=attempt, training_step=step, config=cfg)
    kept = sum(d.keep)
    assert kept <= needed
    assert d.num_to_resample == (0 if d.done else needed - kept)
    uniform = [is_uniform_group(g) for g in groups]
    if d.filtering_active and attempt < 3:
        assert not any(k and u for k, u in zip(d.keep, uniform))  # no uniform group before the last try
    if attempt == 3 or not d.filtering_active:  # the batch is full whenever enough groups were sampled
        assert kept == min(needed, len(groups))
    assert d.num_dropped == sum(u and not k for u, k in zip(uniform, d.keep))


# --------------------------------------------------------------------------------------------------------------------
# Rewards


def test_episode_reward_rules() -> None:
    assert episode_reward(True) == 1.0
    assert episode_reward(True, success_reward=10.0) == 10.0
    assert episode_reward(False, budget_exhausted=True, partial_reward=0.4) == 0.0  # exhaustion -> 0
    assert episode_reward(False, partial_reward=0.4) == 0.4
    assert episode_reward(False) == 0.0


def test_step_validity_under_strict_and_lenient_format() -> None:
    assert classify_step(False, False, strict_format=False) == (False, True)  # no action: invalid, not executed
    assert classify_step(True, False, strict_format=True) == (True, True)  # executed but invalid
    assert classify_step(True, False, strict_format=False) == (True, False)
    assert classify_step(True, True, strict_format=True) == (True, False)


def test_step_rewards_penalise_invalid_steps_and_end_with_the_outcome() -> None:
    # steps: valid, invalid, invalid, valid ; success 1 at the end: [0, -0.1, -0.1, 1]
    r = step_rewards([False, True, True, False], 1.0)
    assert r.tolist() == pytest.approx([0.0, -0.1, -0.1, 1.0])
    assert step_rewards([True], 0.0, invalid_action_penalty=0.5).tolist() == [-0.5]
    assert step_rewards([], 1.0).numel() == 0


@pytest.mark.parametrize("name", list_presets())
def test_an_algo_section_is_a_preset_with_overrides_and_reads_back_as_written(name: str) -> None:
    from arlkit.config import config_to_plain

    assert AlgoConfig.from_section({"preset": name}) == get_preset(name)
    changed = AlgoConfig.from_section({"preset": name, "kl_coef": 0.05, "entropy_coeff": 0.001})
    assert changed == get_preset(name, kl_coef=0.05, entropy_coeff=0.001) and changed.preset == name
    # the nested form a run's config.yaml holds rebuilds the same config
    assert AlgoConfig.from_section(config_to_plain(changed)) == changed
    with pytest.raises(ConfigError, match=r"^algo: unknown key 'kl_coeff'"):
        AlgoConfig.from_section({"preset": name, "kl_coeff": 0.1})


def test_what_an_estimator_needs_is_a_flag_of_its_registration() -> None:
    from arlkit.algos import ADV_ESTIMATORS

    needs = {entry.name: entry.flags for entry in ADV_ESTIMATORS}
    assert needs["empg"].needs_entropy and needs["empg"].needs_step_rows
    assert needs["gigpo"].needs_anchor_states and needs["gigpo"].needs_step_rows
    assert needs["gae"].needs_critic and get_preset("ppo").needs_critic and not get_preset("grpo").needs_critic
    assert not any(f.needs_entropy or f.needs_anchor_states for n, f in needs.items() if n not in ("empg", "gigpo"))
