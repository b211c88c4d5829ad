"""Loading the policy to train, its frozen reference, LoRA adapters, and saving model directories."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import nn

from arlkit.config import ConfigError
from arlkit.rundir import disk_full_named
from arlkit.train.checks import check_model_spec
from arlkit.train.config import LoRAConfig

__all__ = ["apply_lora", "base_causal_lm", "frozen_copy", "load_model", "resolve_model_path", "save_model_dir"]


def resolve_model_path(spec: str, work_dir: Path) -> Path:
    """A local model directory for ``spec``: a path (``PATH`` or ``hf:PATH``), or ``tiny:nano`` /
    ``tiny:micro`` (built offline with seed 0 into ``work_dir/base_model`` the first time; the build is
    deterministic). The spec is checked first (:func:`~arlkit.train.checks.check_model_spec`)."""
    check_model_spec(spec)
    if spec.startswith("tiny:"):
        from arlkit.rollout.corpus import init_tiny_model

        target = work_dir / "base_model"
        if not (target / "config.json").is_file():
            with disk_full_named(target):
                init_tiny_model(spec.split(":", 1)[1], target, 0, overwrite=True)
        return target
    return Path(spec.removeprefix("hf:")).expanduser()


def load_model(path: Path, *, attn_implementation: str, device: str | None = None) -> tuple[nn.Module, Any]:
    """``(model, tokenizer)`` in float32 (master weights; bf16 is applied by autocast), eval mode."""
    from arlkit.policies.attention import register_attention
    from arlkit.policies.hf import load_hf_model

    register_attention()
    model, tokenizer = load_hf_model(path, device=device, dtype=torch.float32)
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter(attn_implementation)
        except Exception as exc:  # noqa: BLE001 - an implementation this model does not support
            raise ConfigError(f"attn_implementation: {attn_implementation!r} is not available: {exc}") from None
    return model.eval(), tokenizer


def frozen_copy(model: nn.Module) -> nn.Module:
    """A deep copy with gradients off (the reference policy)."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def apply_lora(model: nn.Module, config: LoRAConfig) -> nn.Module:
    """Wrap ``model`` with ``peft`` LoRA adapters (only adapter weights train)."""
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in config.target_modules if t in present]
    if not targets:
        raise ConfigError(f"lora.target_modules: none of {list(config.target_modules)} is a module of this model")
    lora = LoraConfig(r=config.r, lora_alpha=config.alpha, lora_dropout=config.dropout, target_modules=targets,
                      task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def base_causal_lm(model: nn.Module) -> nn.Module:
    """The causal LM inside a ``peft`` wrapper (adapters injected), or the model itself."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


def save_model_dir(model: nn.Module, tokenizer: Any, out: Path) -> Path:
    """Write a loadable model directory atomically (temporary directory + rename). LoRA adapters are
    merged into a copy first, so the result loads like any model."""
    from arlkit.policies.tiny import save_model_dir as save_atomically

    to_save = copy.deepcopy(model).merge_and_unload() if hasattr(model, "merge_and_unload") else model
    with disk_full_named(out):
        return save_atomically(to_save, tokenizer, out)
