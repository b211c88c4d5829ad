"""Teacher-forced forward passes for training: log-probs, entropies and values of chosen tokens.

A training row is a token sequence with some positions marked as *targets* (the reply tokens the
policy produced; prompt and observation tokens are context only). :func:`score_rows` returns, per
row, the quantities at its target positions, in order.

**Shared prefixes.** Rows built from the same turn of the budget-aware prompt start with the same
system prompt (a few hundred tokens), and the rows of one group at turn 0 are identical up to the
reply (one step of the demo's RL: 671 step rows, 405 distinct prompts). Rows are
therefore clustered by common prefix, and each forward chunk runs in two passes: one over the
chunk's distinct prefixes (right-padded), whose keys/values are then gathered to the rows that share
them, and one over the rest of every row (a padding mask hides the prefixes' padding). Gradients flow
through the gathered keys/values, so values and gradients equal those of one full pass per row (up to
float rounding; tested). Models whose cache is not plain attention layers fall back to full rows.

**Precision.** ``precision="bf16"`` runs the forward under CPU/GPU autocast (matmuls in bfloat16,
weights and optimizer states stay float32); log-softmax and everything after it run in float32.
``auto`` picks bf16 on CUDA only (see :func:`resolve_precision` for the CPU measurement).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

__all__ = ["PRECISIONS", "Critic", "RowScores", "TokenRow", "autocast", "backward_rows", "resolve_precision",
           "score_rows"]

PRECISIONS = ("auto", "fp32", "bf16")
_MIN_SHARED = 16  # shortest prefix worth encoding once for several rows


@dataclass(frozen=True)
class TokenRow:
    """One training sequence.

    Attributes:
        ids: the token ids of the whole sequence (prompt, replies, observations).
        targets: positions (indices into ``ids``, each >= 1, increasing) of the tokens whose
            log-prob / value is wanted: the policy's reply tokens.
    """

    ids: tuple[int, ...]
    targets: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError("a training row needs at least one target token")
        if self.targets[0] < 1 or self.targets[-1] >= len(self.ids):
            raise ValueError("target positions must lie in [1, len(ids))")


@dataclass
class RowScores:
    """Per-row results of :func:`score_rows`, each a list of 1-D tensors (one per row, length =
    number of targets).

    Attributes:
        logprobs: log-probs of the target tokens under ``softmax(logits / temperature)``.
        entropy: entropies of that distribution at the target positions (when asked).
        values: critic values at the target positions (critic heads only).
    """

    logprobs: list[Tensor]
    entropy: list[Tensor] | None = None
    values: list[Tensor] | None = None


def resolve_precision(precision: str, device: torch.device | str = "cpu") -> Literal["fp32", "bf16"]:
    """``auto`` -> ``bf16`` on CUDA devices with bfloat16, else ``fp32``.

    On CPU ``auto`` keeps float32 even where bfloat16 is native (AMX): at the tiny models' width the
    casts and bf16's attention backward cost more than its faster matrix products save
    (docs/training.md#performance). Ask for ``bf16`` explicitly to use it anyway."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision  # type: ignore[return-value]
    dev = torch.device(device)
    if dev.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "fp32"


@contextlib.contextmanager
def autocast(precision: str, device: torch.device | str = "cpu") -> Iterator[None]:
    """Autocast to bfloat16 when ``precision == "bf16"``; a no-op for ``fp32``."""
    dev = torch.device(device)
    if precision == "bf16":
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            yield
    else:
        yield


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class _Chunk:
    """Rows run together: the first ``prefix[j]`` tokens of row ``rows[j]`` come from the chunk's pass
    over its distinct prefixes (all 0: one plain pass over whole rows)."""

    rows: list[int]
    prefix: list[int]


def _plan(rows: Sequence[TokenRow], share: bool, max_tokens: int) -> list[_Chunk]:
    """Cluster rows by common prefix (on sorted order) and pack them into chunks of at most
    ``max_tokens`` padded tokens. A row's prefix stops before its first target's predecessor, so every
    target is predicted from a suffix position; a row whose prompt no other row shares keeps its whole
    prompt as its prefix (it costs the same, and every suffix stays short)."""
    order = sorted(range(len(rows)), key=lambda i: rows[i].ids)
    if not share:
        return _cut(order, rows, max_tokens)
    clusters: list[tuple[list[int], int]] = []
    for i in order:
        cap = rows[i].targets[0] - 1
        if clusters:
            members, prefix = clusters[-1]
            n = min(_lcp(rows[members[0]].ids, rows[i].ids), prefix, cap)
            # Joining shrinks the members' shared prefix from `prefix` to n; starting a new cluster
            # encodes n common tokens once more. Take the cheaper.
            if n >= _MIN_SHARED and (prefix - n) * len(members) <= n:
                clusters[-1] = (members + [i], n)
                continue
        clusters.append(([i], cap))
    shared: list[tuple[list[int], int]] = []
    plain: list[int] = []  # rows with nothing before their first target's predecessor run whole
    for members, prefix in clusters:
        # Without a worthwhile shared prefix a row is a cluster of its own, its prompt its prefix.
        worthwhile = len(members) > 1 and prefix >= _MIN_SHARED
        for group, p in [(members, prefix)] if worthwhile else [([i], rows[i].targets[0] - 1) for i in members]:
            if p:
                shared.append((group, p))
            else:
                plain += group
    return _pack(shared, rows, max_tokens) + _cut(sorted(plain), rows, max_tokens)


def _pack(clusters: list[tuple[list[int], int]], rows: Sequence[TokenRow], max_tokens: int) -> list[_Chunk]:
    """Clusters into chunks whose padded prefix pass plus padded suffix pass stay within
    ``max_tokens``. Clusters go in order of their rows' suffix length, then prefix length, and a chunk
    is closed early when padding would exceed a quarter of its tokens, so rows of similar widths run
    together. A cluster too large for one chunk is split (its prefix is then encoded once per chunk)."""
    chunks: list[_Chunk] = []
    members: list[int] = []
    prefixes: list[int] = []
    heads = prefix_width = suffix_width = real = 0

    def suffix_of(i: int, prefix: int) -> int:
        return len(rows[i].ids) - prefix

    for cluster, prefix in sorted(clusters, key=lambda c: (max(suffix_of(i, c[1]) for i in c[0]), c[1])):
        fresh = True  # the cluster's prefix is not yet in the current chunk
        for i in sorted(cluster, key=lambda i: len(rows[i].ids)):
            suffix = suffix_of(i, prefix)
            added = (prefix if fresh else 0) + suffix
            padded = (heads + fresh) * max(prefix_width, prefix) + (len(members) + 1) * max(suffix_width, suffix)
            if members and (padded > max_tokens or padded > 1.25 * (real + added) + 64):
                chunks.append(_Chunk(members, prefixes))
                members, prefixes, heads, prefix_width, suffix_width, real, fresh = [], [], 0, 0, 0, 0, True
                added = prefix + suffix
            heads += fresh
            fresh = False
            real += added
            members.append(i)
            prefixes.append(prefix)
            prefix_width, suffix_width = max(prefix_width, prefix), max(suffix_width, suffix)
    if members:
        chunks.append(_Chunk(members, prefixes))
    return chunks


def _cut(members: list[int], rows: Sequence[TokenRow], max_tokens: int) -> list[_Chunk]:
    """Whole rows into chunks of at most ``max_tokens`` padded tokens (rows of similar length
    together, so little compute goes to padding)."""
    chunks: list[_Chunk] = []
    current: list[int] = []
    width = 0
    for i in sorted(members, key=lambda i: len(rows[i].ids)):
        w = max(width, len(rows[i].ids))
        if current and w * (len(current) + 1) > max_tokens:
            chunks.append(_Chunk(current, [0] * len(current)))
            current, w = [], len(rows[i].ids)
        current.append(i)
        width = w
    if current:
        chunks.append(_Chunk(current, [0] * len(current)))
    return chunks


def _cache_kw(body: nn.Module) -> str:
    params = inspect.signature(body.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _body_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    body = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    head = model.get_output_embeddings()
    if body is None or head is None:
        raise TypeError("score_rows needs a causal LM with get_decoder() and get_output_embeddings()")
    return body, head


def _hidden_at_targets(
    body: nn.Module, rows: Sequence[TokenRow], chunk: _Chunk, pad_id: int, device: torch.device
) -> list[Tensor]:
    """Last-layer hidden states at each target's predecessor position, one (n_targets, H) per row."""
    from transformers.cache_utils import DynamicCache

    members = [rows[i] for i in chunk.rows]
    prefix = chunk.prefix
    width = max(len(r.ids) - p for r, p in zip(members, prefix, strict=True))
    ids = torch.full((len(members), width), pad_id, dtype=torch.long, device=device)
    for j, (r, p) in enumerate(zip(members, prefix, strict=True)):
        ids[j, : len(r.ids) - p] = torch.as_tensor(r.ids[p:], device=device)
    start = torch.as_tensor(prefix, device=device).unsqueeze(1)
    kwargs: dict[str, Any] = {"position_ids": start + torch.arange(width, device=device), "use_cache": False}
    if any(prefix):
        # Pass 1: each distinct prefix once, right-padded (a valid token never attends to a later pad).
        distinct: dict[tuple[int, ...], int] = {}
        source = [distinct.setdefault(tuple(r.ids[:p]), len(distinct)) for r, p in zip(members, prefix, strict=True)]
        heads = list(distinct)
        prefix_width = max(len(h) for h in heads)
        prefix_ids = torch.full((len(heads), prefix_width), pad_id, dtype=torch.long, device=device)
        for c, head in enumerate(heads):
            prefix_ids[c, : len(head)] = torch.as_tensor(head, device=device)
        cache = DynamicCache()
        key = _cache_kw(body)
        body(input_ids=prefix_ids, use_cache=True, **{key: cache})
        # Pass 2: the rest of every row against its own prefix's keys/values; padding masked out.
        index = torch.as_tensor(source, device=device)
        gathered = [(layer.keys.index_select(0, index), layer.values.index_select(0, index)) for layer in cache.layers]
        kwargs |= {key: DynamicCache(ddp_cache_data=gathered), "use_cache": True}
        if min(prefix) < prefix_width:
            mask = torch.ones((len(members), prefix_width + width), dtype=torch.long, device=device)
            mask[:, :prefix_width] = torch.arange(prefix_width, device=device) < start
            kwargs["attention_mask"] = mask
    # Right padding: a valid token never attends to a pad of its own row's rest.
    hidden = body(input_ids=ids, **kwargs).last_hidden_state
    out = []
    for j, (r, p) in enumerate(zip(members, prefix, strict=True)):
        where = torch.as_tensor([t - 1 - p for t in r.targets], device=device)
        out.append(hidden[j].index_select(0, where))
    return out


def _plain_cache_layers(model: nn.Module) -> bool:
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return False
    config = getattr(model, "config", None)
    if config is None:
        return False
    try:
        layers = DynamicCache(config=config).layers
    except Exception:  # noqa: BLE001
        return False
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def score_rows(
    model: nn.Module,
    rows: Sequence[TokenRow],
    *,
    temperature: float = 1.0,
    entropy: bool = False,
    entropy_grad: bool = True,
    share_prefix: bool = True,
    max_tokens: int = 16384,
    pad_id: int = 0,
    precision: str = "fp32",
    head: nn.Module | None = None,
) -> RowScores:
    """Log-probs (and optionally entropies) of each row's target tokens under ``model``.

    Args:
        model: a Hugging Face causal LM (``get_decoder()``, ``get_output_embeddings()``).
        rows: the sequences and their target positions.
        temperature: log-probs are of ``softmax(logits / temperature)``, the distribution sampled from.
        entropy: also return the entropy of that distribution at each target position.
        entropy_grad: let gradients flow through the entropies (False: a detached diagnostic, no graph kept).
        share_prefix: encode common prefixes once (module docstring).
        max_tokens: cap on padded suffix tokens per forward chunk (memory bound).
        pad_id: token id used for padding.
        precision: ``fp32`` or ``bf16`` (autocast).
        head: a value head instead of the LM head: returns ``values`` (``logprobs`` is then empty).

    Gradients flow when called outside ``torch.no_grad``.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for training log-probs, got {temperature}")
    body, lm_head = _body_and_head(model)
    device = next(model.parameters()).device
    share = share_prefix and _plain_cache_layers(model)
    n = len(rows)
    logps: list[Tensor | None] = [None] * n
    ents: list[Tensor | None] = [None] * n
    vals: list[Tensor | None] = [None] * n
    # One autocast region for all chunks: the bf16 copies of the weights are made once, not per chunk.
    with autocast(precision, device):
        for chunk in _plan(rows, share, max_tokens):
            hidden = _hidden_at_targets(body, rows, chunk, pad_id, device)
            out = (head or lm_head)(torch.cat(hidden, dim=0))
            _collect(out, chunk, rows, head is not None, temperature, entropy, device, logps, ents, vals,
                     [h.shape[0] for h in hidden], entropy_grad)
    if head is not None:
        return RowScores([], values=[v for v in vals if v is not None])
    return RowScores(
        [lp for lp in logps if lp is not None],
        [e for e in ents if e is not None] if entropy else None,
    )


def _target_logprobs(out: Tensor, chunk: _Chunk, rows: Sequence[TokenRow], temperature: float,
                     device: torch.device) -> tuple[Tensor, Tensor]:
    """``(log-softmax over the vocabulary, log-prob of each target)`` of one chunk's LM-head output, in
    float32, the chunk's targets concatenated row by row."""
    logp_all = torch.log_softmax(out.float() / temperature, dim=-1)
    target_ids = torch.as_tensor([rows[i].ids[p] for i in chunk.rows for p in rows[i].targets], device=device)
    return logp_all, logp_all.gather(1, target_ids[:, None]).squeeze(1)


def _entropy(logp_all: Tensor) -> Tensor:
    """Entropy of each position's distribution, from its log-softmax."""
    return -(logp_all.exp() * logp_all).sum(-1)


def backward_rows(
    model: nn.Module,
    rows: Sequence[TokenRow],
    grad_logprobs: Sequence[Tensor],
    grad_entropies: Sequence[Tensor] | None = None,
    *,
    temperature: float = 1.0,
    share_prefix: bool = True,
    max_tokens: int = 16384,
    pad_id: int = 0,
    precision: str = "fp32",
) -> None:
    """Backpropagate a loss into ``model``'s parameters (accumulating in ``.grad``) one forward chunk at a
    time, given the loss's gradients with respect to each row's target log-probs (``grad_logprobs``, one
    tensor per row, as :func:`score_rows` returns the log-probs) and, when it has an entropy term, its
    entropies (``grad_entropies``). Each chunk is run again with gradients and backpropagated at once, so
    only one chunk's graph is alive: memory is bounded by ``max_tokens`` instead of the whole batch. By
    the chain rule the gradients are those of one backward through :func:`score_rows`'s graph, up to the
    order in which float sums accumulate. The keyword options are :func:`score_rows`'s and must be the ones
    the log-probs were computed with."""
    body, lm_head = _body_and_head(model)
    device = next(model.parameters()).device
    share = share_prefix and _plain_cache_layers(model)
    with autocast(precision, device):
        for chunk in _plan(rows, share, max_tokens):
            hidden = _hidden_at_targets(body, rows, chunk, pad_id, device)
            logp_all, chosen = _target_logprobs(lm_head(torch.cat(hidden, dim=0)), chunk, rows, temperature, device)
            surrogate = (chosen * torch.cat([grad_logprobs[i] for i in chunk.rows]).to(chosen)).sum()
            if grad_entropies is not None:
                ent = _entropy(logp_all)
                surrogate = surrogate + (ent * torch.cat([grad_entropies[i] for i in chunk.rows]).to(ent)).sum()
            surrogate.backward()


def _collect(
    out: Tensor, chunk: _Chunk, rows: Sequence[TokenRow], is_value: bool, temperature: float, entropy: bool,
    device: torch.device, logps: list[Tensor | None], ents: list[Tensor | None], vals: list[Tensor | None],
    sizes: list[int], entropy_grad: bool = True,
) -> None:
    """Per-row log-probs / entropies (LM head) or values (value head) of one chunk, in float32."""
    if is_value:
        for i, v in zip(chunk.rows, out.float().squeeze(-1).split(sizes), strict=True):
            vals[i] = v
        return
    logp_all, chosen = _target_logprobs(out, chunk, rows, temperature, device)
    for i, lp in zip(chunk.rows, chosen.split(sizes), strict=True):
        logps[i] = lp
    if entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            ent = _entropy(logp_all)
        for i, e in zip(chunk.rows, ent.split(sizes), strict=True):
            ents[i] = e


class Critic(nn.Module):
    """PPO's value model: a copy of the policy's transformer with a scalar head (RT App. A.2;
    docs/algorithms.md#ppo-critic-and-recipe: initialised from the base model, its own optimizer).
    ``values(rows)`` gives V at each target's predecessor position, i.e. the state in which the token
    was chosen."""

    def __init__(self, policy_model: nn.Module) -> None:
        super().__init__()
        import copy

        self.lm = copy.deepcopy(policy_model)
        hidden = int(self.lm.config.hidden_size)
        self.value_head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
        # The LM head is unused by the critic; freeze it so it does not collect weight decay.
        out = self.lm.get_output_embeddings()
        if out is not None and out.weight is not self.lm.get_input_embeddings().weight:
            out.weight.requires_grad_(False)

    def values(self, rows: Sequence[TokenRow], **kwargs: Any) -> list[Tensor]:
        """Values at each row's target positions (see :func:`score_rows` for the keyword options)."""
        scores = score_rows(self.lm, rows, head=self.value_head, **kwargs)
        assert scores.values is not None
        return scores.values
