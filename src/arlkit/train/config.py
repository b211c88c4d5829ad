"""Typed configs of ``arlkit train`` and ``arlkit sft``: frozen dataclasses, declared once.

YAML files are serialisations of these classes, read by :func:`arlkit.config.load_config`: nested
mappings for nested sections (``env``: :class:`~arlkit.config.EnvSpec`, ``prompt``:
:class:`~arlkit.rollout.PromptConfig`, ``optim``: :class:`OptimConfig`, ...), unknown keys are errors
naming the valid ones, strings are coerced to the annotated types. ``key=value`` overrides address
nested fields with dots (``optim.lr=3e-4``, ``algo.kl_coef=0.02``, ``env.args.size=5``,
``prompt.history=0``). Every numeric field is checked where it is declared (finite, and its range:
``__post_init__``); files must be UTF-8 and may not give a key twice. The checks that need the
environment, the algorithm library or the file system live in :mod:`arlkit.train.checks`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from arlkit.algos import AlgoConfig, RewardConfig
from arlkit.config import EnvSpec, check_number, expand_shorthands
from arlkit.budgets import TRAIN_BUDGETS, Budget
from arlkit.policies.registry import SamplingConfig
from arlkit.rollout.engine import EngineConfig
from arlkit.rollout.prompts import PromptConfig

__all__ = [
    "DynamicsConfig",
    "LoRAConfig",
    "ModelConfig",
    "OptimConfig",
    "SFTConfig",
    "TrainConfig",
    "ValidationConfig",
]

RUNTIME_FIELDS = ("checkpoint_every", "keep_checkpoints", "tensorboard", "wandb", "progress", "max_active")
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
    """Low-rank adapters through ``peft`` (the ``lora`` extra)."""

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
class ModelConfig:
    """The ``model`` section of ``arlkit train`` and ``arlkit sft``: the starting weights and how training
    forwards run. ``model: PATH`` (or the override ``model=PATH``) sets ``path`` alone."""

    SHORTHAND: ClassVar[str] = "path"

    path: str = "tiny:nano"
    """A local Hugging Face model directory, or ``tiny:nano`` / ``tiny:micro`` to build the embedded tiny
    model offline (into the run directory)."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Forward precision: ``auto`` = bf16 autocast on CUDA, fp32 on CPU; or fp32 / bf16."""
    attn_implementation: str = "arlkit"
    """Attention kernel for rollouts and training: ``arlkit`` (:mod:`arlkit.policies.attention`: SDPA
    without grouped-query copies, a matmul kernel for decode steps on the CPU; transformers' SDPA on
    other devices), ``sdpa`` or ``eager``. Fixed, not probed, so runs are reproducible. Under bf16
    autocast SDPA's CPU backward is slow; prefer ``eager`` there."""
    share_prefix: bool = True
    """Encode prompt prefixes shared by several rows once in training forwards (exact). Short rows gain
    little: the many small forwards that sharing splits a batch into can cost more than the tokens saved."""
    max_tokens: int = 16384
    """Padded tokens per training forward chunk (with ``chunked_backward``, the bound on training memory)."""

    def __post_init__(self) -> None:
        check_number("max_tokens", self.max_tokens, ge=64)


@dataclass(frozen=True)
class TrainConfig:
    """One multi-turn RL run (``arlkit train --config FILE.yaml``)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The initial policy and how its forwards run; ``model: PATH`` sets ``model.path`` alone."""
    env: EnvSpec = field(default_factory=EnvSpec)
    """The environment and its config overrides: ``{name: frozenlake, args: {size: 5, t_max: 32}}``."""
    train_tasks: int = 256
    """Training task pool: the first n tasks of the train split (each step samples from it)."""
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    """The policy-optimisation choices: ``preset`` (``grpo``, ``drgrpo``, ``rloo``, ``gigpo``, ``ppo``, ``gspo``,
    ``cispo``, ``sapo``, ``empg``, ``dapo``, ``sampo``; docs/algorithms.md#presets) and overrides of its
    choices (``kl_coef``, ``step_rows``, ``clip_ratio_high``, ...): ``algo: {preset: sampo, kl_coef: 0.02}``."""
    budget: Budget = Budget.parse("full")
    """Budget distribution: ``full`` (every group at T_max), ``budgetmix`` (one candidate per group,
    docs/algorithms.md#budgetmix), or one budget for every group: turns (``10``) or a percentage of T_max (``25%``)."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """How prompts are built: ``budget_mode`` (``announced`` states the budget and turn counters; BudgetMix
    needs it), ``history`` (None = full chat; h >= 1 = the first observation and the last h (action,
    observation) pairs; 0 = the current observation only; ARLArena: 2; trajectory rows need the full chat)
    and ``counters`` (``system``: RT Table 2, rebuilt every turn; ``observation``: appended to each
    observation, so earlier messages never change, rollouts reuse their KV caches and trajectory rows are
    exactly the sampled sequences)."""
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
    chunked_backward: bool = False
    """Backpropagate the policy loss one forward chunk at a time (:func:`~arlkit.train.forward.backward_rows`):
    the loss's gradients with respect to the log-probs (and entropies) from a forward without gradients
    first, then each chunk's forward and backward, so only one chunk's graph (``max_tokens``) is held
    instead of the whole mini-batch's. Costs one more forward (without gradients) per update; the
    gradients are the default's up to float rounding, which can flip a sampled token, so a seeded run
    draws other rollouts with it than without. Use it when a batch's graphs do not fit in memory
    (docs/training.md#the-rl-loop). PPO's critic still backpropagates its mini-batch at once."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Rollout engine bounds: trajectories alive (``max_active``), policy requests and environment
    steps in flight; they do not change results."""
    seed: int = 0
    """Seed of task sampling, budgets, rollouts and mini-batch order."""
    checkpoint_every: int = 10
    """Write a checkpoint every this many steps (and at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest deleted first)."""
    tensorboard: bool = True
    """Also write TensorBoard event files (``tb/``, torch's ``SummaryWriter``)."""
    wandb: str = ""
    """Also log to this Weights & Biases project (empty: off; the ``wandb`` extra)."""
    progress: bool = True
    """Show a progress bar (step, reward, KL, ETA) on stderr."""

    def __post_init__(self) -> None:
        minimum = {
            "train_tasks": 1, "steps": 0, "tasks_per_step": 1, "group_size": 1, "mini_batches": 1, "epochs": 1,
            "seed": 0, "checkpoint_every": 1, "keep_checkpoints": 1,
        }  # fmt: skip
        for name, low in minimum.items():
            check_number(name, getattr(self, name), ge=low)
        # Nested sections declared elsewhere: their finiteness (ranges are their own).
        check_number("sampling.temperature", self.sampling.temperature, gt=0)
        check_number("reward.success_reward", self.reward.success_reward)
        check_number("reward.invalid_action_penalty", self.reward.invalid_action_penalty, ge=0)
        _check_sections(self)
        if not isinstance(self.algo, AlgoConfig):
            raise ValueError(f"algo: expected an AlgoConfig (arlkit.algos.get_preset(name, **overrides)), got {self.algo!r}")
        if self.budget.is_budgetmix and self.prompt.budget_mode != "announced":
            raise ValueError("prompt.budget_mode: BudgetMix announces the sampled budget in the prompt; use announced")
        if self.sampling.top_p != 1.0 or self.sampling.top_k != 0:
            raise ValueError("sampling.top_p/top_k: training log-probs are of the full tempered distribution; "
                             "truncated sampling is not supported (keep top_p 1.0, top_k 0)")
        if self.mini_batches > self.tasks_per_step * self.group_size:
            raise ValueError(f"mini_batches: {self.mini_batches} exceeds the {self.tasks_per_step * self.group_size} "
                             "trajectories of a rollout batch")


@dataclass(frozen=True)
class SFTConfig:
    """Behaviour cloning (``arlkit sft``): expert demonstrations through the agent's own prompts."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The model cloned into and how its forwards run (as for training)."""
    env: EnvSpec = field(default_factory=EnvSpec)
    """The environment and its config overrides (as for training)."""
    expert: str = "noisy-oracle:0.3"
    """Policy that drives the demonstrations (``oracle``, ``noisy-oracle:EPS``, ``hf:PATH``)."""
    relabel: bool = True
    """Label every step with the environment oracle's optimal action for the announced remaining budget
    (states from the noisy expert, actions from the oracle); False clones the expert's own replies."""
    label_horizon: Literal["announced", "t_max"] = "announced"
    """With ``relabel``, the turns the labelling oracle plans for: ``announced``, the remaining budget the
    prompt states (a budget-aware expert); ``t_max``, the family's full budget at every step whatever the
    prompt says (a budget-unaware expert: what cloning an agent trained without budgets gives, and the
    starting point at which budget-aware RL such as BudgetMix has something to add; RT §5.2)."""
    label_noise: float = 0.0
    """With ``relabel``, the share of labels replaced by a uniformly random admissible action (drawn per
    trajectory seed and turn, apart from the oracle's tie-breaking): the cloned expert is then the
    epsilon-greedy version of the labelling oracle, whose mistakes are noise that RL can sharpen away
    rather than systematic (``docs/training.md``, "The demo's recipe")."""
    aware_share: float = 0.0
    """With ``relabel`` and ``label_horizon: t_max``, the share of demonstrations (drawn per trajectory
    seed) labelled by the budget-aware oracle instead, as with ``announced``: a base that acts on the
    announced budget some of the time, so that budget-aware RL meets the
    budget-aware moves among its own samples (``docs/training.md``, "The budget-fork maps")."""
    keep: Literal["all", "success"] = "all"
    """Which demonstrations to keep: all, or only successful trajectories (ARLArena's self-bootstrapped
    recipe with a model as the expert)."""
    think: str = ""
    """Reasoning text of relabelled replies: ``<think>{think}</think><action>A</action>``."""
    tasks: int = 256
    """Training tasks played (first n of the train split)."""
    samples: int = 4
    """Demonstrations per task."""
    budget: Budget = Budget.parse("full")
    """Budget of the demonstrations: ``full`` (T_max), ``budgetmix`` (a candidate per task), turns or a
    percentage of T_max."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """Budget mode, history window and counter position of the prompts: use those the agent will be
    trained and evaluated with (see :class:`TrainConfig`)."""
    rows: Literal["step", "trajectory"] = "step"
    """``step``: one row per step with the target reply (relabelled or the expert's). ``trajectory``: one
    row per trajectory holding the executed replies, of which those whose action was oracle-optimal
    (with ``relabel``; every reply otherwise) are targets: cheaper, needs the full chat (history null)."""
    steps: int = 200
    """Optimizer steps."""
    batch_rows: int = 64
    """Demonstration steps (rows) per optimizer step."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-3, warmup_steps=10, weight_decay=0.01,
                                                                   grad_clip=1.0))
    """AdamW and its schedule, as for training (``critic_lr`` unused): lr 1e-3 after 10 updates of linear
    warm-up, constant by default."""
    seed: int = 0
    """Seed of the demonstrations and the row order."""
    checkpoint_every: int = 50
    """Write a checkpoint every this many steps (a re-run resumes from the last one); does not change results."""
    tensorboard: bool = True
    """Also write TensorBoard event files (``tb/``: ``sft/loss``, ``sft/grad_norm``, ``sft/lr``)."""
    wandb: str = ""
    """Also log to this Weights & Biases project (empty: off; the ``wandb`` extra)."""

    def __post_init__(self) -> None:
        for name in ("tasks", "samples", "steps", "batch_rows", "checkpoint_every"):
            check_number(name, getattr(self, name), ge=1)
        check_number("seed", self.seed, ge=0)
        check_number("label_noise", self.label_noise, ge=0, le=1)
        check_number("aware_share", self.aware_share, ge=0, le=1)
        if self.aware_share > 0 and not (self.relabel and self.label_horizon == "t_max"):
            raise ValueError("aware_share mixes budget-aware labels into a budget-unaware expert's: it needs "
                             "relabel: true and label_horizon: t_max")
        _check_sections(self)
        if not isinstance(self.optim, OptimConfig):
            raise ValueError(f"optim: expected an OptimConfig, got {self.optim!r}")
        if self.rows == "trajectory" and self.prompt.history is not None:
            raise ValueError("prompt.history: trajectory rows hold the whole chat; set prompt.history: null or "
                             "rows: step")


def _check_sections(config: Any) -> None:
    """The ``model``, ``env`` and ``prompt`` sections have their types (a string names the model's path or
    the environment, as in YAML)."""
    expand_shorthands(config)
    object.__setattr__(config, "budget", Budget.parse(config.budget, TRAIN_BUDGETS))  # a string as in YAML
    if not isinstance(config.model, ModelConfig):
        raise ValueError(f"model: expected a ModelConfig or a model path, got {config.model!r}")
    if not isinstance(config.env, EnvSpec):
        raise ValueError(f"env: expected EnvSpec(name, args), got {config.env!r}")
    if not isinstance(config.prompt, PromptConfig):
        raise ValueError(f"prompt: expected a PromptConfig, got {config.prompt!r}")
