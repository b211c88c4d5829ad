"""arlkit inside verl's trainer: arlkit's policy losses and advantage estimators in verl's registries.

Installed as the ``verl.plugins`` entry point ``arlkit`` (the ``verl`` extra), so
``import verl`` imports this module in every process, Ray workers included, and the names exist
wherever verl looks them up:

- ``arlkit_<loss>`` for every arlkit policy loss (``arlkit_vanilla``, ``arlkit_gspo``,
  ``arlkit_cispo``, ``arlkit_sapo``, and any registered before verl was imported), under verl's
  policy-loss signature. The token losses are reduced by verl's own ``agg_loss`` with the actor's
  ``global_batch_info``, so data-parallel scaling is verl's. ``rollout_is_weights`` multiply the token
  losses first, as in verl's built-ins.
- ``arlkit_<estimator>`` for the outcome estimators that need no per-sample extras
  (``arlkit_grpo``, ``arlkit_rloo``, ``arlkit_reinforce_plus_plus_baseline``). ``gigpo`` and ``empg``
  need step rows, anchor states and entropies that verl's estimator call does not pass: they run in
  arlkit's v1 trainer modes (``trainer.v1.trainer_mode=arlkit``, :mod:`arlkit.integrations.verl_trainer`),
  which this module registers the moment a process imports ``verl.trainer.ppo.v1`` (a one-shot import
  hook: processes that never import verl's trainer do not pay for it). ``gae`` needs arlkit's critic.
  Called from verl's own trainers, those names fail on first use with a message that says so.

Settings. A loss takes the fields its arlkit config shares with verl's ``ActorConfig``
(``clip_ratio_low``, ``clip_ratio_high``, ``clip_ratio_c``, SAPO's ``tau_pos``, ``tau_neg``; ``clip_ratio`` fills
unset low/high), and an
estimator those it shares with verl's ``AlgoConfig`` (``norm_adv_by_std_in_grpo``). Anything else
travels in the environment variable :data:`SETTINGS_ENV`, a JSON object keyed by loss or estimator
name, e.g. ``{"sapo": {"tau_pos": 1.0}, "gspo": {"sequence_mask": true}}``. Unknown names or keys
raise at the first call, never silently dropped.

verl logs a plugin that fails to load at DEBUG only, so this module logs its own failures at WARNING
and re-raises (docs/scale-out.md).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from arlkit.algos.advantages import ADV_ESTIMATORS, AdvantageInputs, compute_advantage
from arlkit.algos.policy_losses import POLICY_LOSSES, policy_loss
from arlkit.algos.diagnostics import sequence_groups

__all__ = ["PREFIX", "SETTINGS_ENV", "TRAINER_MODULE", "estimator_settings", "register_all", "settings_for"]

PREFIX = "arlkit_"
SETTINGS_ENV = "ARLKIT_VERL_SETTINGS"
_log = logging.getLogger("arlkit.verl")
_ACTOR_FIELDS = ("clip_ratio_low", "clip_ratio_high", "clip_ratio_c", "tau_pos", "tau_neg")
_ALGO_FIELDS = ("norm_adv_by_std_in_grpo",)
TRAINER_MODULE = "verl.trainer.ppo.v1"
"""Importing this module registers arlkit's trainer modes (:mod:`arlkit.integrations.verl_trainer`)."""


def settings_for(name: str) -> dict[str, Any]:
    """The :data:`SETTINGS_ENV` entry of ``name`` (``{}`` when unset)."""
    return dict(_settings(os.environ.get(SETTINGS_ENV, "").strip(), name))


@functools.lru_cache(maxsize=64)
def _settings(raw: str, name: str) -> dict[str, Any]:
    """Parsed and checked once per value of the variable (a loss runs on every micro-batch)."""
    if not raw:
        return {}
    try:
        table = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${SETTINGS_ENV} is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise ValueError(f"${SETTINGS_ENV} must be a JSON object keyed by loss or estimator name")
    known = set(POLICY_LOSSES.names()) | set(ADV_ESTIMATORS.names())
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"${SETTINGS_ENV} names {', '.join(unknown)}; valid names: {', '.join(sorted(known))}")
    entry = table.get(name, {})
    if not isinstance(entry, dict):
        raise ValueError(f"${SETTINGS_ENV}[{name!r}] must be an object of settings")
    return entry


def _get(config: Any, field: str) -> Any:
    if config is None:
        return None
    if hasattr(config, "get"):
        return config.get(field, None)
    return getattr(config, field, None)


def _shared(config: Any, fields: tuple[str, ...], own: Any) -> dict[str, Any]:
    """The values ``config`` holds for the fields of ``own`` (an arlkit config class) it shares."""
    names = set(getattr(own, "__dataclass_fields__", {}))
    out = {f: _get(config, f) for f in fields if f in names and _get(config, f) is not None}
    clip = _get(config, "clip_ratio")
    for side in ("clip_ratio_low", "clip_ratio_high"):
        if side in names and side not in out and clip is not None:
            out[side] = clip
    return out


def estimator_settings(name: str, config: Any) -> dict[str, Any]:
    """The settings of arlkit estimator ``name`` inside verl: the fields it shares with verl's
    ``algorithm`` config, then ``$ARLKIT_VERL_SETTINGS``."""
    return {**_shared(config, _ALGO_FIELDS, ADV_ESTIMATORS.get(name).config_cls), **settings_for(name)}


def _loss(name: str) -> Callable[..., tuple[torch.Tensor, dict[str, float]]]:
    entry = POLICY_LOSSES.get(name)

    def verl_loss(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                  response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config: Any = None,
                  rollout_is_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        from verl.trainer.ppo.core_algos import agg_loss

        batch_info = dict(_get(config, "global_batch_info") or {})

        def aggregate(token_loss: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
            if rollout_is_weights is not None:
                token_loss = token_loss * rollout_is_weights
            return agg_loss(token_loss, mask.to(token_loss.dtype), mode, **batch_info)

        hyper = {**_shared(config, _ACTOR_FIELDS, entry.config_cls), **settings_for(name)}
        out = policy_loss(name, old_log_prob, log_prob, advantages, response_mask, loss_agg_mode,
                          aggregate=aggregate, **hyper)
        # AA Fig. 3's sequence groups from what verl hands a loss (no entropy or reference KL here:
        # every row counts as high-entropy, and there are no KL shares; docs/arena.md).
        groups = sequence_groups(old_log_prob, log_prob, advantages, response_mask)
        return out.loss, {key: float(value) for key, value in {**out.metrics, **groups}.items()}

    verl_loss.__name__ = f"{PREFIX}{name}"
    return verl_loss


def _estimator(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    entry = ADV_ESTIMATORS.get(name)

    def verl_estimator(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, config: Any = None,
                       index: Any = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if entry.flags.needs_step_rows:
            raise RuntimeError(
                f"{PREFIX}{name} needs step rows, anchor states and entropies, which verl's estimator call does not "
                "pass: run it in arlkit's trainer mode (trainer.use_v1=true trainer.v1.trainer_mode=arlkit) on data "
                "written with `arlkit verl data --layout step` (docs/scale-out.md)"
            )
        if entry.flags.needs_critic:
            raise RuntimeError(f"{PREFIX}{name} needs arlkit's critic values, which verl does not pass; use verl's "
                               "own algorithm.adv_estimator=gae")
        hyper = estimator_settings(name, config)
        inputs = AdvantageInputs(response_mask=response_mask, token_level_rewards=token_level_rewards, index=index)
        out = compute_advantage(name, inputs, **hyper)
        return out.advantages, out.returns

    verl_estimator.__name__ = f"{PREFIX}{name}"
    return verl_estimator


def register_all() -> list[str]:
    """Register every arlkit loss and estimator in verl's registries; the names registered. A name
    verl already holds is left alone (a second import of this module registers nothing new)."""
    from verl.trainer.ppo import core_algos

    done = []
    for name in POLICY_LOSSES.names():
        if f"{PREFIX}{name}" not in core_algos.POLICY_LOSS_REGISTRY:
            core_algos.register_policy_loss(f"{PREFIX}{name}")(_loss(name))
            done.append(f"{PREFIX}{name}")
    for name in ADV_ESTIMATORS.names():
        if f"{PREFIX}{name}" not in core_algos.ADV_ESTIMATOR_REGISTRY:
            core_algos.register_adv_est(f"{PREFIX}{name}")(_estimator(name))
            done.append(f"{PREFIX}{name}")
    return done


def _register_trainers() -> None:
    """Import :mod:`arlkit.integrations.verl_trainer` (its import registers the trainer modes); a failure is
    logged at WARNING and never breaks the import of verl's trainer."""
    try:
        import arlkit.integrations.verl_trainer  # noqa: F401
    except Exception as exc:
        _log.warning("arlkit's verl plugin could not register its trainer modes: %s: %s", type(exc).__name__, exc)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then`` right after module ``name`` is first executed (once; then it leaves ``sys.meta_path``)."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the real finders, now that this one is gone
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then

        def exec_module(module: Any) -> None:
            run(module)
            then()

        loader.exec_module = exec_module  # this spec's own loader object
        return spec


def _register_trainers_when_imported() -> None:
    if TRAINER_MODULE in sys.modules:
        _register_trainers()
    elif not any(isinstance(f, _AfterImport) and f.name == TRAINER_MODULE for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(TRAINER_MODULE, _register_trainers))


try:
    register_all()
    _register_trainers_when_imported()
except Exception as exc:  # verl would log this at DEBUG only and go on without the names
    _log.warning("arlkit's verl plugin could not register its losses and estimators: %s: %s", type(exc).__name__, exc)
    raise
