"""Typed configs of ``arlkit train`` and ``arlkit sft``: frozen dataclasses, declared once.

YAML files are serialisations of these classes: nested mappings for nested sections, unknown keys
are errors naming the valid ones, strings are coerced to the annotated types. ``key=value``
overrides address nested fields with dots (``optim.lr=3e-4``, ``algo.kl_coef=0.02``,
``env_args.size=5``). Every numeric field is checked where it is declared (finite, and its range:
``__post_init__``); files must be UTF-8 and may not give a key twice. The checks that need the
environment, the algorithm library or the file system live in :mod:`arlkit.train.checks`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from arlkit.algos import RewardConfig
from arlkit.config import ConfigError, build_config, check_number, parse_yaml, read_yaml
from arlkit.policies.registry import SamplingConfig

__all__ = [
    "DynamicsConfig",
    "LoRAConfig",
    "OptimConfig",
    "SFTConfig",
    "TrainConfig",
    "ValidationConfig",
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
        # lr = 0 is allowed: updates that change nothing (on-policy ratios stay exactly 1, a diagnostic).
        for name in ("lr", "critic_lr", "weight_decay", "grad_clip", "warmup_steps"):
            check_number(name, getattr(self, name), ge=0)
        check_number("beta1", self.beta1, ge=0, lt=1)
        check_number("beta2", self.beta2, ge=0, lt=1)
        check_number("eps", self.eps, gt=0)


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
        check_number("r", self.r, ge=1)
        check_number("alpha", self.alpha, gt=0)
        check_number("dropout", self.dropout, ge=0, lt=1)
        if not self.target_modules:
            raise ValueError("target_modules: name at least one linear layer")


@dataclass(frozen=True)
class DynamicsConfig:
    """R_single (docs/metrics.md#training-dynamics): mean oracle step quality on a fixed, saved pool of states."""

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
            check_number(name, getattr(self, name), ge=0)


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
        check_number("every", self.every, ge=0)
        check_number("tasks", self.tasks, ge=1)
        check_number("samples", self.samples, ge=1)


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
    docs/algorithms.md#budgetmix), or a whole number of turns for every group."""
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
    """Success reward, invalid-action penalty, strict format (docs/algorithms.md#rewards)."""
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
        minimum = {
            "train_tasks": 1, "steps": 0, "tasks_per_step": 1, "group_size": 1, "mini_batches": 1, "epochs": 1,
            "max_tokens": 64, "max_active": 1, "seed": 0, "checkpoint_every": 1, "keep_checkpoints": 1,
        }  # fmt: skip
        for name, low in minimum.items():
            check_number(name, getattr(self, name), ge=low)
        # Nested sections declared elsewhere: their finiteness (ranges are their own).
        check_number("sampling.temperature", self.sampling.temperature, gt=0)
        check_number("reward.success_reward", self.reward.success_reward)
        check_number("reward.invalid_action_penalty", self.reward.invalid_action_penalty, ge=0)
        if self.budget not in ("full", "budgetmix") and not str(self.budget).isdigit():
            raise ValueError(f"budget: must be full, budgetmix or a whole number of turns, got {self.budget!r}")
        if self.budget == "budgetmix" and self.budget_mode != "announced":
            raise ValueError("budget_mode: BudgetMix announces the sampled budget in the prompt; use announced")
        if self.history is not None and self.history < 0:
            raise ValueError(f"history: must be >= 0 (0: the current observation only) or null (full chat), "
                             f"got {self.history}")
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
    checkpoint_every: int = 50
    """Write a checkpoint every this many steps (a re-run resumes from the last one); does not change results."""

    def __post_init__(self) -> None:
        for name in ("tasks", "samples", "steps", "batch_rows", "max_tokens", "checkpoint_every"):
            check_number(name, getattr(self, name), ge=1)
        for name in ("lr", "warmup_steps", "weight_decay", "grad_clip", "seed"):
            check_number(name, getattr(self, name), ge=0)
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
    """Read a YAML file (optional; UTF-8, no key given twice: :func:`arlkit.config.read_yaml`) and apply
    dotted ``key=value`` overrides (values parsed as YAML scalars, so ``3e-4`` is a number and ``null`` is
    None). Raises :class:`ConfigError` naming the file or field."""
    data: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml(path)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of config keys")
        data = loaded
    for key, value in (overrides or {}).items():
        parsed = parse_yaml(value, where=f"override {key}") if isinstance(value, str) else value
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
