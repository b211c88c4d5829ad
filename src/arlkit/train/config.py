"""Typed configs of ``arlkit train`` and ``arlkit sft``: frozen dataclasses, declared once.

YAML files are serialisations of these classes: nested mappings for nested sections, unknown keys
are errors naming the valid ones, strings are coerced to the annotated types. ``key=value``
overrides address nested fields with dots (``optim.lr=3e-4``, ``algo.kl_coef=0.02``,
``env_args.size=5``). :func:`check_train_config` adds the checks that need the environment and the
algorithm library (budget above T_max, G = 1 with a group estimator, a critic preset without a
critic) and returns the resolved pieces.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from arlkit.algos import AlgoConfig, RewardConfig, get_preset
from arlkit.config import ConfigError, build_config
from arlkit.policies.registry import SamplingConfig
from arlkit.train.budgetmix import budget_candidates

__all__ = [
    "DynamicsConfig",
    "LoRAConfig",
    "OptimConfig",
    "ResolvedTrain",
    "SFTConfig",
    "TrainConfig",
    "ValidationConfig",
    "check_train_config",
    "config_from_dict",
    "config_to_plain",
    "config_diff",
    "load_config",
]

C = TypeVar("C")

RUNTIME_FIELDS = ("checkpoint_every", "keep_checkpoints", "tensorboard", "progress")
"""TrainConfig fields that do not change results: a resumed run may change them freely."""


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with gradient clipping and a per-update learning-rate schedule."""

    lr: float = 1e-6
    """Peak learning rate of the policy (AA's testbed: 1e-6 for 1.5-7B models; tiny models need ~3e-4)."""
    weight_decay: float = 0.01
    """AdamW weight decay (AA: 0.01)."""
    beta1: float = 0.9
    """AdamW β1."""
    beta2: float = 0.999
    """AdamW β2."""
    eps: float = 1e-8
    """AdamW ε."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value (AA: 1.0); 0 disables clipping."""
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    """Learning-rate decay after warm-up, over all optimizer updates of the run (AA: constant)."""
    warmup_steps: int = 0
    """Optimizer updates of linear warm-up from 0 to ``lr``."""
    critic_lr: float = 1e-5
    """Learning rate of the critic (PPO only)."""

    def __post_init__(self) -> None:
        if self.lr < 0 or self.critic_lr < 0:
            raise ValueError(f"lr: must be >= 0, got {self.lr} (critic_lr {self.critic_lr})")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay: must be >= 0, got {self.weight_decay}")
        if self.grad_clip < 0:
            raise ValueError(f"grad_clip: must be >= 0 (0 = off), got {self.grad_clip}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps: must be >= 0, got {self.warmup_steps}")


@dataclass(frozen=True)
class LoRAConfig:
    """Low-rank adapters through ``peft`` (``pip install arlkit[lora]``)."""

    enabled: bool = False
    """Train LoRA adapters instead of all weights; the reference policy is then the base weights."""
    r: int = 8
    """Adapter rank."""
    alpha: int = 16
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input."""
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    """Names of the linear layers that get adapters."""

    def __post_init__(self) -> None:
        if self.r < 1:
            raise ValueError(f"r: must be >= 1, got {self.r}")


@dataclass(frozen=True)
class DynamicsConfig:
    """R_single (SPEC §4.4): mean oracle step quality on a fixed, saved pool of states."""

    states: int = 512
    """Size of the state pool (0 disables R_single)."""
    actions: int = 8
    """Next actions sampled per state at each validation."""
    pool_tasks: int = 64
    """Held-out (test) tasks the initial policy plays to build the pool."""
    pool_samples: int = 4
    """Trajectories per pool task (several seeds, spread over depths)."""

    def __post_init__(self) -> None:
        for name in ("states", "actions", "pool_tasks", "pool_samples"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class ValidationConfig:
    """Validation during training: R_multi on held-out tasks and R_single on the state pool."""

    every: int = 10
    """Validate every this many steps (and before the first and after the last); 0 = never."""
    tasks: int = 64
    """Held-out (test split) tasks for R_multi."""
    samples: int = 1
    """Trajectories per task for R_multi."""
    dynamics: DynamicsConfig = field(default_factory=DynamicsConfig)
    """The R_single state pool."""

    def __post_init__(self) -> None:
        if self.every < 0 or self.tasks < 1 or self.samples < 1:
            raise ValueError("every must be >= 0, tasks and samples >= 1")


@dataclass(frozen=True)
class TrainConfig:
    """One multi-turn RL run (``arlkit train --config FILE.yaml``)."""

    model: str = "tiny:nano"
    """Initial policy: a local Hugging Face model directory, or ``tiny:nano`` / ``tiny:micro`` to build
    the embedded tiny model offline (into the run directory)."""
    env: str = "frozenlake"
    """Registered environment."""
    env_args: dict[str, Any] = field(default_factory=dict)
    """Environment config overrides, e.g. ``{size: 5, t_max: 32, task_set: budget_sensitive}``."""
    train_tasks: int = 256
    """Training task pool: the first n tasks of the train split (each step samples from it)."""
    preset: str = "grpo"
    """Algorithm preset (``grpo``, ``drgrpo``, ``rloo``, ``gigpo``, ``ppo``, ``gspo``, ``cispo``, ``sapo``,
    ``empg``, ``dapo``, ``sampo``)."""
    algo: dict[str, Any] = field(default_factory=dict)
    """Flat overrides of the preset's :class:`~arlkit.algos.AlgoConfig` (``kl_coef``, ``step_rows``,
    ``clip_ratio_high``, ...)."""
    budget: str = "full"
    """Budget distribution: ``full`` (every group at T_max), ``budgetmix`` (one candidate per group,
    SPEC §6.8), or a whole number of turns for every group."""
    budget_mode: Literal["announced", "hidden"] = "announced"
    """Whether prompts state the budget and turn counters (BudgetMix needs ``announced``)."""
    history: int | None = None
    """Chat history shown to the model: None = full chat; h >= 1 = the first observation and the last h
    (action, observation) pairs; 0 = the current observation only
    (ARLArena: 2). Trajectory rows need the full chat."""
    counters: Literal["system", "observation"] = "system"
    """Where announced prompts put the completed/remaining counters: ``system`` (RT Table 2, rebuilt every
    turn) or ``observation`` (appended to each observation; earlier messages never change, so rollouts reuse
    their KV caches and trajectory rows are exactly the sampled sequences)."""
    steps: int = 100
    """RL steps (rollout batch + updates)."""
    tasks_per_step: int = 8
    """Groups (tasks) per rollout batch."""
    group_size: int = 8
    """Trajectories per group (G)."""
    mini_batches: int = 1
    """Optimizer updates per epoch over the rollout batch (split by trajectories); more = staler updates."""
    epochs: int = 1
    """Passes over each rollout batch."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer and schedule."""
    sampling: SamplingConfig = field(default_factory=lambda: SamplingConfig(temperature=1.0, max_new_tokens=32))
    """Rollout sampling (AA: temperature 1.0, top-p 1.0). Log-probs are of softmax(logits / temperature)."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Success reward, invalid-action penalty, strict format (SPEC §6.6)."""
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """Optional LoRA adapters."""
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    """R_multi / R_single validation."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Training forward precision: ``auto`` = bf16 autocast on CUDA, fp32 on CPU (measured faster there);
    or fp32 / bf16."""
    attn_implementation: str = "arlkit"
    """Attention kernel for rollouts and training: ``arlkit`` (:mod:`arlkit.policies.attention`: SDPA
    without grouped-query copies, a matmul kernel for decode steps on the CPU; transformers' SDPA on
    other devices), ``sdpa`` or ``eager``. Fixed, not probed, so runs are reproducible. On the 2-core CPU
    in fp32: micro rollouts 1.07-1.09x faster than ``sdpa`` (docs/policies.md), a nano forward+backward
    of 64 x 300 tokens 2.5 s vs 2.8 s (``sdpa``) and 3.7 s (``eager``); under bf16 autocast SDPA's CPU
    backward is slow, prefer eager there."""
    share_prefix: bool = True
    """Encode prompt prefixes shared by several rows once in training forwards (exact)."""
    max_tokens: int = 16384
    """Padded tokens per training forward chunk (memory bound)."""
    max_active: int = 256
    """Most trajectories in flight during rollouts."""
    seed: int = 0
    """Seed of task sampling, budgets, rollouts and mini-batch order."""
    checkpoint_every: int = 10
    """Write a checkpoint every this many steps (and at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest deleted first)."""
    tensorboard: bool = True
    """Also write TensorBoard event files (no tensorboard package needed)."""
    progress: bool = True
    """Show a progress bar (step, reward, KL, ETA) on stderr."""

    def __post_init__(self) -> None:
        checks = {
            "train_tasks": self.train_tasks >= 1, "steps": self.steps >= 0, "tasks_per_step": self.tasks_per_step >= 1,
            "group_size": self.group_size >= 1, "mini_batches": self.mini_batches >= 1, "epochs": self.epochs >= 1,
            "max_tokens": self.max_tokens >= 64, "max_active": self.max_active >= 1,
            "checkpoint_every": self.checkpoint_every >= 1, "keep_checkpoints": self.keep_checkpoints >= 1,
        }  # fmt: skip
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"{name}: invalid value {getattr(self, name)!r}")
        if self.budget not in ("full", "budgetmix") and not str(self.budget).isdigit():
            raise ValueError(f"budget: must be full, budgetmix or a whole number of turns, got {self.budget!r}")
        if self.budget == "budgetmix" and self.budget_mode != "announced":
            raise ValueError("budget_mode: BudgetMix announces the sampled budget in the prompt; use announced")
        if self.history is not None and self.history < 0:
            raise ValueError(f"history: must be >= 0 (0: the current observation only) or null (full chat), "
                             f"got {self.history}")
        if self.sampling.temperature <= 0:
            raise ValueError("sampling.temperature: training samples; it must be > 0")
        if self.sampling.top_p != 1.0 or self.sampling.top_k != 0:
            raise ValueError("sampling.top_p/top_k: training log-probs are of the full tempered distribution; "
                             "truncated sampling is not supported (keep top_p 1.0, top_k 0)")
        if self.mini_batches > self.tasks_per_step * self.group_size:
            raise ValueError(f"mini_batches: {self.mini_batches} exceeds the {self.tasks_per_step * self.group_size} "
                             "trajectories of a rollout batch")


@dataclass(frozen=True)
class SFTConfig:
    """Behaviour cloning (``arlkit sft``): expert demonstrations through the agent's own prompts."""

    model: str = "tiny:nano"
    """Initial model: a local Hugging Face directory or ``tiny:nano`` / ``tiny:micro``."""
    env: str = "frozenlake"
    """Registered environment."""
    env_args: dict[str, Any] = field(default_factory=dict)
    """Environment config overrides."""
    expert: str = "noisy-oracle:0.3"
    """Policy that drives the demonstrations (``oracle``, ``noisy-oracle:EPS``, ``hf:PATH``)."""
    relabel: bool = True
    """Label every step with the environment oracle's optimal action for the announced remaining budget
    (states from the noisy expert, actions from the oracle); False clones the expert's own replies."""
    keep: Literal["all", "success"] = "all"
    """Which demonstrations to keep: all, or only successful trajectories (ARLArena's self-bootstrapped
    recipe with a model as the expert)."""
    think: str = ""
    """Reasoning text of relabelled replies: ``<think>{think}</think><action>A</action>``."""
    tasks: int = 256
    """Training tasks played (first n of the train split)."""
    samples: int = 4
    """Demonstrations per task."""
    budget: str = "full"
    """Budget of the demonstrations: ``full`` (T_max), ``budgetmix`` (a candidate per task) or turns."""
    budget_mode: Literal["announced", "hidden"] = "announced"
    """Prompt budget mode (use the one the agent will be trained and evaluated with)."""
    history: int | None = None
    """History window of the prompts (as for training)."""
    counters: Literal["system", "observation"] = "system"
    """Counter position of announced prompts (as for training)."""
    rows: Literal["step", "trajectory"] = "step"
    """``step``: one row per step with the target reply (relabelled or the expert's). ``trajectory``: one
    row per trajectory holding the executed replies, of which those whose action was oracle-optimal
    (with ``relabel``; every reply otherwise) are targets: cheaper, needs the full chat (history null)."""
    steps: int = 200
    """Optimizer steps."""
    batch_rows: int = 64
    """Demonstration steps (rows) per optimizer step."""
    lr: float = 1e-3
    """AdamW learning rate (constant after warm-up)."""
    warmup_steps: int = 10
    """Linear warm-up updates."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient-norm clip (0 = off)."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Forward precision (``auto``: bf16 autocast on CUDA, fp32 on CPU)."""
    attn_implementation: str = "arlkit"
    """Attention kernel (``arlkit``, ``sdpa`` or ``eager``; see :class:`TrainConfig`)."""
    max_tokens: int = 16384
    """Padded tokens per forward chunk."""
    seed: int = 0
    """Seed of the demonstrations and the row order."""

    def __post_init__(self) -> None:
        for name in ("tasks", "samples", "steps", "batch_rows", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.lr < 0:
            raise ValueError(f"lr: must be >= 0, got {self.lr}")
        if self.budget not in ("full", "budgetmix") and not str(self.budget).isdigit():
            raise ValueError(f"budget: must be full, budgetmix or a whole number of turns, got {self.budget!r}")
        if self.rows == "trajectory" and self.history is not None:
            raise ValueError("history: trajectory rows hold the whole chat; set history: null or rows: step")


# -- (de)serialisation -------------------------------------------------------------------------------


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _field_default(cls: type, name: str) -> Any:
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return None


def _shallow(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def config_from_dict(cls: type[C], data: Mapping[str, Any], *, where: str = "") -> C:
    """Build ``cls`` from a nested mapping (nested dataclass fields from nested mappings)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or cls.__name__}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        tp = hints.get(key)
        name = f"{where}.{key}" if where else str(key)
        if tp is not None and _is_dataclass_type(tp):
            if isinstance(value, tp):
                values[key] = value
            elif isinstance(value, Mapping):
                # A partial section overrides the field's own default instance, so defaults stay declared once.
                base = _field_default(cls, key)
                merged = {**(_shallow(base) if base is not None else {}), **value}
                values[key] = config_from_dict(tp, merged, where=name)
            else:
                raise ConfigError(f"{name}: expected a mapping of {tp.__name__} fields, got {value!r}")
        elif tp is not None and typing.get_origin(tp) is dict and value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a mapping, got {value!r}")
        else:
            values[key] = value
    return build_config(cls, values, where=where)


def config_to_plain(config: Any) -> dict[str, Any]:
    """A YAML/JSON-friendly nested dict (tuples become lists)."""

    def plain(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, Mapping):
            return {str(k): plain(v) for k, v in x.items()}
        return x

    return plain(config)


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def load_config(cls: type[C], path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> C:
    """Read a YAML file (optional) and apply dotted ``key=value`` overrides (values parsed as YAML
    scalars, so ``3e-4`` is a number and ``null`` is None)."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of config keys")
        data = loaded
    for key, value in (overrides or {}).items():
        parsed = yaml.safe_load(value) if isinstance(value, str) else value
        if isinstance(value, str) and isinstance(parsed, (dict, list)) and key.split(".")[-1] not in ("env_args", "algo"):
            parsed = value
        _set_dotted(data, key, parsed)
    return config_from_dict(cls, data)


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` lines for every leaf that differs between two plain configs."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        name = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            lines += config_diff(a, b, prefix=f"{name}.")
        elif a != b:
            lines.append(f"{name}: {a!r} -> {b!r}")
    return lines


# -- checks that need the environment and the algorithm library -------------------------------------


@dataclass(frozen=True)
class ResolvedTrain:
    """What :func:`check_train_config` derived from a config.

    Attributes:
        algo: the preset with the ``algo`` overrides applied.
        t_max: the environment's full budget.
        budgets: the budgets a group may get (one value unless BudgetMix).
    """

    algo: AlgoConfig
    t_max: int
    budgets: tuple[int, ...]


def resolve_budgets(budget: str, t_max: int, *, field_name: str = "budget") -> tuple[int, ...]:
    """The budget values of a ``budget`` setting for an environment with ``t_max``."""
    if budget == "full":
        return (t_max,)
    if budget == "budgetmix":
        return tuple(budget_candidates(t_max))
    turns = int(budget)
    if not 1 <= turns <= t_max:
        raise ConfigError(f"{field_name}: {turns} turns is outside [1, T_max = {t_max}] of this environment")
    return (turns,)


def check_train_config(config: TrainConfig) -> ResolvedTrain:
    """Resolve the preset and the budgets; raise :class:`ConfigError` naming the field for impossible
    combinations."""
    from arlkit.envs import env_config, list_envs, make

    if config.env not in list_envs():
        raise ConfigError(f"env: unknown environment {config.env!r}; valid choices: {', '.join(list_envs())}")
    env_config(config.env, config.env_args)
    algo = get_preset(config.preset, **config.algo)
    t_max = int(make(config.env, **config.env_args).t_max)
    budgets = resolve_budgets(config.budget, t_max)
    if algo.adv_estimator != "gae" and config.group_size < 2:
        raise ConfigError(
            f"group_size: preset {config.preset!r} (adv_estimator={algo.adv_estimator!r}) compares the trajectories "
            f"of a group; it needs group_size >= 2, got {config.group_size}"
        )
    if not algo.step_rows and config.history is not None:
        raise ConfigError(
            "history: trajectory rows (step_rows=false) hold the whole chat; set history: null, or algo.step_rows: true"
        )
    if algo.needs_critic and algo.step_rows:
        raise ConfigError("algo.step_rows: the PPO critic's token-level GAE runs over whole trajectories; use trajectory rows")
    if algo.needs_critic and config.optim.critic_lr <= 0:
        raise ConfigError("optim.critic_lr: the critic needs a learning rate > 0")
    if config.lora.enabled:
        try:
            import peft  # noqa: F401
        except ImportError:
            raise ConfigError("lora.enabled: LoRA needs the peft package (pip install 'arlkit[lora]')") from None
    return ResolvedTrain(algo, t_max, budgets)
