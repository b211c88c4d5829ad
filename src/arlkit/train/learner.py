"""The learner of an RL run: the policy being trained, its frozen reference, the critic, their
optimizers and schedule, and the rollout policy that samples from the same weights, built from a
:class:`~arlkit.train.config.TrainConfig` in one call and checkpointed as one state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from arlkit.algos import AlgoConfig
from arlkit.policies.hf import HFPolicy
from arlkit.train.batch import ChatTokens
from arlkit.train.checkpoint import restore_state
from arlkit.train.config import TrainConfig
from arlkit.train.forward import Critic, resolve_precision
from arlkit.train.model import apply_lora, base_causal_lm, frozen_copy, load_model
from arlkit.train.optim import adamw, lr_scheduler

__all__ = ["Learner"]


@dataclass
class Learner:
    """Everything an RL update touches.

    Attributes:
        model: the trained model (a ``peft`` wrapper with LoRA); ``lm`` is the causal LM inside it.
        tokenizer, chat: its tokenizer and chat-template encoder.
        ref: the frozen reference policy (None without a KL term, or with LoRA: the base weights
            with adapters disabled serve as the reference).
        critic: PPO's value head (None for critic-free presets), ``critic_opt`` its optimizer.
        optimizer, scheduler: AdamW and the learning-rate schedule of the trainable parameters
            ``params``.
        policy: the rollout policy (:class:`~arlkit.policies.hf.HFPolicy`) on ``lm``'s weights.
        use_kl: whether the loss has a KL term.
        forward: the keyword arguments of every training forward (:func:`~arlkit.train.forward.score_rows`).
        lora: whether ``model`` trains LoRA adapters only.
        chunked_backward: backpropagate the policy loss one forward chunk at a time
            (:func:`~arlkit.train.forward.backward_rows`; ``TrainConfig.chunked_backward``).
    """

    model: nn.Module
    lm: nn.Module
    tokenizer: Any
    chat: ChatTokens
    ref: nn.Module | None
    critic: Critic | None
    params: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    critic_opt: torch.optim.Optimizer | None
    policy: HFPolicy
    use_kl: bool
    forward: dict[str, Any]
    lora: bool
    chunked_backward: bool = False

    @classmethod
    def build(cls, config: TrainConfig, algo: AlgoConfig, model_path: Path) -> Learner:
        """Load ``model_path`` and build the rest as ``config`` and the resolved preset ``algo`` say."""
        model, tokenizer = load_model(model_path, attn_implementation=config.model.attn_implementation)
        chat = ChatTokens(tokenizer)
        precision = resolve_precision(config.model.precision, next(model.parameters()).device)
        use_kl = algo.use_kl_loss and algo.kl_coef > 0
        critic = Critic(model) if algo.needs_critic else None
        ref = frozen_copy(model) if use_kl and not config.lora.enabled else None
        if config.lora.enabled:
            model = apply_lora(model, config.lora)  # the reference is the base: adapters disabled
        lm = base_causal_lm(model)
        params = [p for p in model.parameters() if p.requires_grad]
        o = config.optim
        optimizer = adamw(params, o)
        scheduler = lr_scheduler(optimizer, o, config.steps * config.mini_batches * config.epochs)
        critic_opt = None
        if critic is not None:
            critic_opt = adamw([p for p in critic.parameters() if p.requires_grad], o, lr=o.critic_lr)
        policy = HFPolicy(lm, tokenizer, config.sampling, name="policy", attn_implementation=config.model.attn_implementation,
                          max_batch_size=64)
        forward = {"temperature": config.sampling.temperature, "share_prefix": config.model.share_prefix,
                   "max_tokens": config.model.max_tokens, "pad_id": chat.pad_id, "precision": precision}
        return cls(model, lm, tokenizer, chat, ref, critic, params, optimizer, scheduler, critic_opt, policy, use_kl,
                   forward, config.lora.enabled, config.chunked_backward)  # fmt: skip

    def state(self) -> dict[str, Any]:
        """The checkpoint payload: trainable weights (LoRA: the adapters), optimizer and schedule states."""
        trained = self.model
        return {
            "model": {n: p.detach() for n, p in trained.named_parameters() if p.requires_grad}
            if self.lora else trained.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "critic": self.critic.state_dict() if self.critic is not None else None,
            "critic_optimizer": self.critic_opt.state_dict() if self.critic_opt is not None else None,
        }

    def restore(self, checkpoint: Path, state: dict[str, Any]) -> None:
        """Load a :meth:`state` saved in ``checkpoint`` (and its RNG states); a mismatch raises
        :class:`~arlkit.train.checkpoint.CheckpointError` naming the checkpoint."""
        parts: dict[str, Any] = {"model": self.model, "optimizer": self.optimizer, "scheduler": self.scheduler}
        if self.critic is not None and self.critic_opt is not None:
            parts |= {"critic": self.critic, "critic_optimizer": self.critic_opt}
        restore_state(checkpoint, state, parts, partial=("model",) if self.lora else ())
