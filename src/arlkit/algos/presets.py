"""Presets: named, typed bundles of the four policy-optimisation choices (docs/algorithms.md#presets; AA Table 1).
AA: "ARLArena: A Unified Framework for Stable Agentic Reinforcement Learning"
RT: "What Does Multi-Turn Reinforcement Learning Really Improve in LLM Agents?"

An :class:`AlgoConfig` holds everything a trainer has to choose: the advantage estimator and its config,
the policy loss and its hyperparameters, the loss aggregation, the KL and entropy terms, dynamic
filtering, whether a critic is trained and whether rows are environment steps. A preset is only a
named set of choices over :class:`AlgoConfig`'s defaults (which are the ``grpo`` baseline)::

    cfg = get_preset("dapo")                           # GRPO + clip-higher + dynamic filtering
    cfg = get_preset("grpo", clip_ratio_high=0.28)     # any field, by its own name
    cfg = get_preset("cispo", sequence_mask=True)      # AA's CISPO_SM
    cfg = override(cfg, kl_coef="0.05")                # strings (CLI key=value) are coerced

Overrides are flat: a key is a field of :class:`AlgoConfig` or of the active estimator's, loss's or
filter's config. Changing ``adv_estimator`` or ``policy_loss`` starts that component from its own
defaults; a loss that fixes its aggregation (GSPO, SAPO) also sets ``loss_agg_mode``. Invalid
combinations raise :class:`~arlkit.config.ConfigError` (a ``ValueError``) naming the field and the
valid choices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from arlkit.algos.advantages import ADV_ESTIMATORS
from arlkit.algos.aggregation import LOSS_AGG_MODES
from arlkit.algos.filtering import FilterConfig
from arlkit.algos.kl import KL_KINDS
from arlkit.algos.policy_losses import POLICY_LOSSES
from arlkit.config import ConfigError, build_config
from arlkit.registry import Registry

__all__ = ["PRESETS", "AlgoConfig", "Preset", "get_preset", "list_presets", "override"]


@dataclass(frozen=True)
class AlgoConfig:
    """The policy-optimisation choices of a run. Defaults are the ``grpo`` preset."""

    preset: str = "grpo"
    """The preset the other fields start from (:data:`PRESETS`); in a config section, the fields given
    beside it override the preset's choices (:meth:`from_section`)."""
    adv_estimator: str = "grpo"
    """Registered advantage estimator (``grpo``, ``rloo``, ``reinforce_plus_plus_baseline``, ``gigpo``, ``gae``, ``empg``, ...)."""
    adv_config: Any = None
    """The estimator's config dataclass; None means its defaults."""
    policy_loss: str = "vanilla"
    """Registered policy loss (``vanilla``, ``gspo``, ``cispo``, ``sapo``, ...)."""
    loss_config: Any = None
    """The loss's config dataclass (clip ratios, τ, sequence masking); None means its defaults."""
    loss_agg_mode: str = "token-mean"
    """Aggregation of token losses, see :data:`~arlkit.algos.LOSS_AGG_MODES`; GSPO and SAPO require
    ``seq-mean-token-mean``."""
    loss_scale_factor: float | None = None
    """``L_max`` for ``seq-mean-token-sum-norm``; None uses the padded response length."""
    use_kl_loss: bool = True
    """Add ``kl_coef·agg(k)`` to the actor loss (RT and AA both regularise to the reference policy)."""
    kl_penalty: str = "low_var_kl"
    """KL estimator, see :data:`~arlkit.algos.KL_KINDS` (RT: low_var_kl; AA: k3, the same estimator)."""
    kl_coef: float = 0.01
    """Weight of the KL term (AA's 0.01; RT's coefficient is missing from the paper's text)."""
    entropy_coeff: float = 0.0
    """Weight of the entropy bonus ``−entropy_coeff·agg(H)``."""
    dynamic_filtering: bool = False
    """Drop groups whose raw rewards are all equal and resample (docs/algorithms.md#dynamic-filtering)."""
    filter_config: FilterConfig = field(default_factory=FilterConfig)
    """Settings of dynamic filtering (used only when it is on)."""
    cliprange_value: float = 0.5
    """Value clipping range of the critic loss (verl's default); used only with a critic."""
    step_rows: bool = False
    """One training row per environment step (AA's layout) instead of one per trajectory (RT's GRPO layout);
    required by step-level estimators (``gigpo``, ``empg``)."""

    def __post_init__(self) -> None:
        est = ADV_ESTIMATORS.get(self.adv_estimator)
        loss = POLICY_LOSSES.get(self.policy_loss)
        if self.adv_config is None:
            object.__setattr__(self, "adv_config", est.config())
        if self.loss_config is None:
            object.__setattr__(self, "loss_config", loss.config())
        _check_instance("adv_config", self.adv_config, est.config_cls, f"adv_estimator={self.adv_estimator!r}")
        _check_instance("loss_config", self.loss_config, loss.config_cls, f"policy_loss={self.policy_loss!r}")
        _check_instance("filter_config", self.filter_config, FilterConfig, "dynamic filtering")
        _choice("loss_agg_mode", self.loss_agg_mode, LOSS_AGG_MODES)
        fixed = loss.flags.agg_mode
        if fixed and self.loss_agg_mode != fixed:
            raise ConfigError(
                f"loss_agg_mode: policy_loss={self.policy_loss!r} always aggregates with {fixed!r} (docs/algorithms.md#policy-losses); "
                f"got {self.loss_agg_mode!r}"
            )
        _choice("kl_penalty", self.kl_penalty, KL_KINDS)
        for name in ("kl_coef", "entropy_coeff"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)}")
        if self.loss_scale_factor is not None and self.loss_scale_factor <= 0:
            raise ConfigError(f"loss_scale_factor: must be > 0 or None, got {self.loss_scale_factor}")
        if self.cliprange_value <= 0:
            raise ConfigError(f"cliprange_value: must be > 0, got {self.cliprange_value}")
        if self.preset not in PRESETS:
            raise ConfigError(f"preset: unknown preset {self.preset!r}; valid choices: {', '.join(list_presets())}")
        if est.flags.needs_step_rows and not self.step_rows:
            raise ConfigError(
                f"step_rows: adv_estimator={self.adv_estimator!r} needs one row per environment step; "
                "set step_rows=True"
            )

    @property
    def needs_critic(self) -> bool:
        """Whether the run trains a value model: the estimator uses one (``gae``)."""
        return ADV_ESTIMATORS.get(self.adv_estimator).flags.needs_critic

    @classmethod
    def from_section(cls, data: Mapping[str, Any], *, where: str = "algo") -> AlgoConfig:
        """The ``algo`` section of a run's config: ``preset`` (default ``grpo``) and overrides of its choices,
        flat (``kl_coef: 0.02``, ``clip_ratio_high: 0.28``) or as the nested sections :meth:`to_dict`
        writes (``loss_config: {clip_ratio_high: 0.28}``), so a saved config reads back as it was."""
        values = dict(data)
        preset = str(values.pop("preset", "grpo"))
        flat = {key: value for key, value in values.items() if not (key in _NESTED and isinstance(value, Mapping))}
        for key in _NESTED:
            if isinstance(values.get(key), Mapping):
                flat |= values[key]
        try:
            return get_preset(preset, **flat)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable nested dict; :meth:`from_section` rebuilds the config."""
        return dataclasses.asdict(self)


def _check_instance(name: str, value: Any, cls: type, owner: str) -> None:
    if not isinstance(value, cls):
        raise ConfigError(f"{name}: {owner} takes a {cls.__name__}, got {type(value).__name__}")


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")


_NESTED = ("adv_config", "loss_config", "filter_config")
_TOP_LEVEL = tuple(f.name for f in dataclasses.fields(AlgoConfig))


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _owners_elsewhere(key: str, registry: Registry[Any], active: str) -> list[str]:
    return [e.name for e in registry if e.name != active and key in _field_names(e.config_cls)]


def override(config: AlgoConfig, **overrides: Any) -> AlgoConfig:
    """A copy of ``config`` with flat field overrides (see the module docstring); strings are coerced."""
    values: dict[str, Any] = {name: getattr(config, name) for name in _TOP_LEVEL}
    top = {k: v for k, v in overrides.items() if k in _TOP_LEVEL}
    rest = {k: v for k, v in overrides.items() if k not in _TOP_LEVEL}
    values.update(top)
    if "adv_estimator" in top and top["adv_estimator"] != config.adv_estimator and "adv_config" not in top:
        values["adv_config"] = None
    if "policy_loss" in top and top["policy_loss"] != config.policy_loss and "loss_config" not in top:
        values["loss_config"] = None
        fixed = POLICY_LOSSES.get(str(top["policy_loss"])).flags.agg_mode
        if fixed and "loss_agg_mode" not in top:
            values["loss_agg_mode"] = fixed

    est = ADV_ESTIMATORS.get(str(values["adv_estimator"]))
    loss = POLICY_LOSSES.get(str(values["policy_loss"]))
    owners = {
        "adv_config": _field_names(est.config_cls),
        "loss_config": _field_names(loss.config_cls),
        "filter_config": _field_names(FilterConfig),
    }
    routed: dict[str, dict[str, Any]] = {name: {} for name in _NESTED}
    for key, value in rest.items():
        homes = [name for name, keys in owners.items() if key in keys]
        if len(homes) > 1:
            raise ConfigError(f"{key}: ambiguous, it is a field of {' and '.join(homes)}")
        if not homes:
            raise ConfigError(_unknown_key_message(key, str(values["adv_estimator"]), str(values["policy_loss"]), owners))
        routed[homes[0]][key] = value
    if routed["adv_config"]:
        values["adv_config"] = est.config(values["adv_config"], **routed["adv_config"])
    if routed["loss_config"]:
        values["loss_config"] = loss.config(values["loss_config"], **routed["loss_config"])
    if routed["filter_config"]:
        values["filter_config"] = build_config(
            FilterConfig, {**dataclasses.asdict(values["filter_config"]), **routed["filter_config"]}, where="filter"
        )
    return build_config(AlgoConfig, values)


def _unknown_key_message(key: str, adv_estimator: str, policy_loss: str, owners: Mapping[str, set[str]]) -> str:
    elsewhere = []
    losses = _owners_elsewhere(key, POLICY_LOSSES, policy_loss)
    if losses:
        elsewhere.append(f"policy_loss in ({', '.join(losses)})")
    estimators = _owners_elsewhere(key, ADV_ESTIMATORS, adv_estimator)
    if estimators:
        elsewhere.append(f"adv_estimator in ({', '.join(estimators)})")
    valid = sorted(set(_TOP_LEVEL).union(*owners.values()))
    if elsewhere:
        return (
            f"{key}: not a setting of policy_loss={policy_loss!r} with adv_estimator={adv_estimator!r}; "
            f"it applies only with {' or '.join(elsewhere)}. Valid keys: {', '.join(valid)}"
        )
    return f"unknown key {key!r}; valid keys: {', '.join(valid)}"


class Preset(NamedTuple):
    """A named bundle of choices."""

    description: str
    """One line: what the preset is and where it comes from."""
    choices: Mapping[str, Any]
    """Flat overrides of :class:`AlgoConfig`'s defaults (the ``grpo`` baseline)."""


PRESETS: Mapping[str, Preset] = {
    "grpo": Preset("GRPO: group-normalised outcome advantage, dual-clip loss, token-mean, low_var_kl KL", {}),
    "drgrpo": Preset(
        "Dr.GRPO: no std normalisation, seq-mean-token-sum-norm aggregation",
        {"norm_adv_by_std_in_grpo": False, "loss_agg_mode": "seq-mean-token-sum-norm"},
    ),
    "rloo": Preset("RLOO: leave-one-out baseline, dual-clip loss", {"adv_estimator": "rloo"}),
    "gigpo": Preset(
        "GiGPO: episode + anchor-state step advantage on step rows", {"adv_estimator": "gigpo", "step_rows": True}
    ),
    "ppo": Preset(
        "PPO: token-level GAE with a value-clipped critic (clip 0.5)", {"adv_estimator": "gae"}
    ),
    "gspo": Preset("GSPO: sequence-level ratio and clip, seq-mean-token-mean", {"policy_loss": "gspo"}),
    "cispo": Preset("CISPO: clipped stop-gradient IS weight (eps_low 1.0); add sequence_mask=True for CISPO_SM",
                    {"policy_loss": "cispo"}),
    "sapo": Preset("SAPO: soft sigmoid gate, seq-mean-token-mean; add sequence_mask=True for SAPO_SM",
                   {"policy_loss": "sapo"}),
    "empg": Preset("EMPG: entropy-modulated GRPO advantage on step rows", {"adv_estimator": "empg", "step_rows": True}),
    "dapo": Preset(
        "DAPO: GRPO with clip-higher (eps_high 0.28) and dynamic filtering",
        {"clip_ratio_high": 0.28, "dynamic_filtering": True},
    ),
    "sampo": Preset(
        "SAMPO (AA §5): GiGPO advantage, GSPO sequence-level clipping, dynamic filtering, step rows",
        {"adv_estimator": "gigpo", "policy_loss": "gspo", "dynamic_filtering": True, "step_rows": True},
    ),
}
"""The built-in presets (docs/algorithms.md#presets)."""


def list_presets() -> list[str]:
    """Preset names, sorted."""
    return sorted(PRESETS)


def get_preset(name: str, **overrides: Any) -> AlgoConfig:
    """The config of preset ``name`` with flat field overrides applied (module docstring)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid choices: {', '.join(list_presets())}")
    base = override(AlgoConfig(preset=name), **PRESETS[name].choices)
    return override(base, **overrides) if overrides else base
