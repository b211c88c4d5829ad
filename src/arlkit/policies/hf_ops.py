"""The stateless parts of the ``hf`` backend (:mod:`arlkit.policies.hf`): loading a local model offline,
its context window and end-of-reply tokens, per-conversation keys and sampling seeds, logits
processing and sampling, and teacher-forced log-probs of continuations (scoring: what
:meth:`~arlkit.policies.hf.HFPolicy.score` computes).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from arlkit.policies.chat import ChatTokens
from arlkit.policies.kv_cache import forward_parameters, require_cache_layers
from arlkit.policies.protocol import Message, PolicyError, Request
from arlkit.policies.quiet import quiet_progress
from arlkit.policies.registry import SamplingConfig

__all__ = [
    "check_vocabulary", "continuation_logprobs", "conversation_key", "end_token_ids", "evaluating", "load_hf_model",
    "model_context_length", "process_logits", "sample_tokens", "sampling_seed", "score_conversations",
]

_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
_UNSET_MAX_LENGTH = 10**8  # transformers' tokenizers report a huge model_max_length when none is known


def model_context_length(model: Any, tokenizer: Any) -> int | None:
    """The context window of ``model``: the smaller of its config's ``max_position_embeddings`` and
    the tokenizer's ``model_max_length`` (ignoring the placeholder transformers puts when unknown);
    ``None`` when neither is known."""
    limits = [int(getattr(model.config, "max_position_embeddings", 0) or 0)]
    limits.append(int(getattr(tokenizer, "model_max_length", 0) or 0))
    known = [n for n in limits if 0 < n < _UNSET_MAX_LENGTH]
    return min(known) if known else None


def end_token_ids(chat: ChatTokens, model: Any) -> frozenset[int]:
    """Tokens that end a reply: the tokenizer's end-of-turn tokens plus the model's generation-config
    end tokens."""
    ids = set(chat.eos_ids)
    source = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(source, int):
        ids.add(source)
    elif isinstance(source, (list, tuple)):
        ids.update(int(i) for i in source)
    return frozenset(ids)


@contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode without autograd for the block; the model's training mode is restored after it."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def conversation_key(request: Request) -> int:
    """The KV-cache key of ``request``'s trajectory: its seed, and in announced mode its budget
    (``turn + remaining``), since trajectories of one task and sample share their seeds across
    budgets and may run side by side."""
    budget = request.turn + request.remaining if request.remaining is not None else -1
    return hash((request.seed, budget))


def sampling_seed(seed: int, turn: int) -> int:
    """The 63-bit seed of the generator that samples turn ``turn`` of trajectory ``seed``."""
    digest = hashlib.sha256(f"arlkit-hf:{seed}:{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def process_logits(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Log-probabilities of the distribution sampled from, given raw logits of shape (N, V).

    Temperature 0 (greedy) returns the model's own log-softmax (T = 1) with no truncation.
    Otherwise the logits are divided by the temperature; top-k keeps the k largest (ties at the
    k-th value are kept); top-p keeps the smallest set of most likely tokens whose mass reaches
    ``top_p`` (the most likely token is always kept). Removed tokens get ``-inf``.
    """
    z = logits.float()
    if temperature > 0:
        z = z / temperature
        if 0 < top_k < z.shape[-1]:
            kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
            z = z.masked_fill(z < kth, float("-inf"))
        if top_p < 1.0:
            sorted_z, order = torch.sort(z, dim=-1, descending=True)
            probs = torch.softmax(sorted_z, dim=-1)
            mass_before = torch.cumsum(probs, dim=-1) - probs
            drop_sorted = mass_before >= top_p
            drop_sorted[..., 0] = False
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            z = z.masked_fill(drop, float("-inf"))
    return torch.log_softmax(z, dim=-1)


def sample_tokens(logp: torch.Tensor, generators: Sequence[torch.Generator] | None) -> torch.Tensor:
    """One token per row of ``logp`` (N, V): argmax when ``generators`` is None, else inverse-CDF
    sampling with one uniform from each row's own generator (row-independent by construction)."""
    if generators is None:
        return logp.argmax(dim=-1)
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators]).to(logp.device)
    cdf = torch.cumsum(logp.double().exp(), dim=-1)
    target = (1.0 - u) * cdf[:, -1]  # in (0, total]: never selects a zero-probability token
    tokens = torch.searchsorted(cdf, target[:, None]).squeeze(1).clamp_(max=logp.shape[-1] - 1)
    bad = torch.isinf(logp.gather(1, tokens[:, None]).squeeze(1))
    return torch.where(bad, logp.argmax(dim=-1), tokens)


# -- loading -----------------------------------------------------------------------------------


def _is_causal_lm(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    auto_map = getattr(config, "auto_map", None) or {}
    return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or "AutoModelForCausalLM" in auto_map


def load_hf_model(
    path: str | Path, *, device: str | None = None, dtype: torch.dtype | None = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a local causal-LM directory, loaded offline in eval mode.

    Raises :class:`PolicyError` when the path does not exist, is not a model directory, is not a
    causal LM, or its tokenizer has no chat template.
    """
    for name in _OFFLINE:
        os.environ.setdefault(name, "1")
    require_cache_layers()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    where = Path(path).expanduser()
    if not where.exists():
        raise PolicyError(f"model directory {str(path)!r} does not exist")
    if not where.is_dir() or not (where / "config.json").is_file():
        raise PolicyError(f"{str(path)!r} is not a Hugging Face model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(where, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the user's file
        raise PolicyError(f"cannot read the model config in {str(path)!r}: {exc}") from None
    if not _is_causal_lm(config):
        raise PolicyError(f"{str(path)!r} is not a causal language model (model type {config.model_type!r})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=True)
    except Exception as exc:  # noqa: BLE001
        raise PolicyError(f"cannot load the tokenizer in {str(path)!r}: {exc}") from None
    if not getattr(tokenizer, "chat_template", None):
        raise PolicyError(f"the tokenizer in {str(path)!r} has no chat template; arlkit renders every prompt with it")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
    try:
        with quiet_progress():
            model = AutoModelForCausalLM.from_pretrained(where, local_files_only=True, dtype=dtype)
    except Exception as exc:  # noqa: BLE001
        raise PolicyError(f"cannot load the model in {str(path)!r}: {exc}") from None
    check_vocabulary(model, tokenizer, str(path))
    return model.to(device).eval(), tokenizer


def check_vocabulary(model: Any, tokenizer: Any, where: str) -> None:
    """Raise :class:`PolicyError` when the tokenizer has ids the model's input embedding has no row for
    (a tokenizer from another model, tokens added without resizing the embedding): such an id would
    fail mid-run with an IndexError, or on a GPU with a device-side assert."""
    embedding = model.get_input_embeddings()
    rows = getattr(embedding, "num_embeddings", None)
    if rows is None:
        return
    largest = max([*tokenizer.get_vocab().values(), *tokenizer.all_special_ids, len(tokenizer) - 1])
    if largest >= int(rows):
        raise PolicyError(f"the tokenizer in {where!r} has token ids up to {largest}, but the model's embedding has "
                          f"{rows} rows (ids 0 to {int(rows) - 1}): the tokenizer does not belong to this model")


# -- scoring -----------------------------------------------------------------------------------


def continuation_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[int]],
    *,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    batch_size: int = 16,
    pad_id: int = 0,
) -> list[torch.Tensor]:
    """Teacher-forced log-probs of ``continuations[i]`` after ``prompts[i]``: one 1-D tensor per pair.

    Rows are left-padded with position ids counting real tokens only (as at generation time) and
    the distribution is :func:`process_logits` ``(temperature, top_k, top_p)``; temperature 0 means
    the model's own log-probs. Gradients flow when called outside ``torch.no_grad``.
    """
    device = next(model.parameters()).device
    keep_kw = "logits_to_keep" if "logits_to_keep" in forward_parameters(model) else None
    out: list[torch.Tensor | None] = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(continuations[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        seqs = [list(prompts[i]) + list(continuations[i]) for i in idx]
        width = max(len(s) for s in seqs)
        longest = max(len(continuations[i]) for i in idx)
        if longest == 0:
            for i in idx:
                out[i] = torch.zeros(0, device=device)
            continue
        ids = torch.full((len(idx), width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros(len(idx), width, dtype=torch.long, device=device)
        for row, seq in enumerate(seqs):
            ids[row, width - len(seq) :] = torch.as_tensor(seq, device=device)
            mask[row, width - len(seq) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs = {keep_kw: longest + 1} if keep_kw else {}
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False, **kwargs).logits
        logits = logits[:, -(longest + 1) : -1]
        for row, i in enumerate(idx):
            n = len(continuations[i])
            if n == 0:
                out[i] = torch.zeros(0, device=device)
                continue
            logp = process_logits(logits[row, longest - n :], temperature, top_k, top_p)
            target = torch.as_tensor(list(continuations[i]), device=device)
            out[i] = logp.gather(1, target[:, None]).squeeze(1)
    return [t if t is not None else torch.zeros(0) for t in out]


def score_conversations(
    model: Any,
    chat: ChatTokens,
    messages: Sequence[Sequence[Message]],
    continuations: Sequence[Sequence[int]],
    sampling: SamplingConfig | None,
    *,
    batch_size: int,
) -> list[list[float]]:
    """Per-token log-probs of each continuation (token ids) as the assistant's reply to its
    conversation, rendered by ``chat``; ``sampling=None`` scores under the model's own distribution
    (T = 1), else under the (tempered, truncated) distribution of that sampling config. The model is
    in eval mode meanwhile."""
    if len(messages) != len(continuations):
        raise ValueError(f"{len(messages)} conversations but {len(continuations)} continuations")
    prompts = [chat.prompt_ids(m) for m in messages]
    s = sampling or SamplingConfig(temperature=0.0)
    with evaluating(model):
        out = continuation_logprobs(
            model, prompts, [list(c) for c in continuations],
            temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, batch_size=batch_size, pad_id=chat.pad_id,
        )
    return [t.tolist() for t in out]
