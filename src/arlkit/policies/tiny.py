"""The embedded tiny model: a byte-level BPE tokenizer and a small Qwen2-style causal LM, built offline.

``arlkit.rollout.corpus.init_tiny_model("nano", out_dir)`` writes a directory that ``AutoModelForCausalLM`` and
``AutoTokenizer`` load offline (and that ``hf:out_dir`` serves). Nothing is downloaded:

1. **Corpus.** Scripted policies (random and a noisy oracle) play every built-in environment
   through arlkit's own rollout engine and budget-aware prompts, in both budget modes; every
   conversation the policy was shown, and every reply, is rendered with the ChatML template. The
   tokenizer therefore learns exactly the text it will see.
2. **Tokenizer.** Byte-level BPE (``tokenizers``). A split rule isolates every character of a grid
   row (the FrozenLake and Sokoban symbols) during training, so no merge joins two cells and one
   cell is one token whatever its neighbours; the action tags ``<think>``, ``</think>``,
   ``<action>``, ``</action>`` are single tokens; the saved pre-tokenizer is Qwen2's; ChatML
   special tokens ``<|endoftext|>`` (padding), ``<|im_start|>`` and ``<|im_end|>`` (end of a turn).
3. **Model.** A Qwen2 config (RMSNorm, rotary positions, SwiGLU, grouped-query attention, tied
   embeddings) initialised from ``seed``: nano ~0.9M parameters, micro ~9.7M. The weights are
   random: the model is a starting point for behaviour cloning and RL, not a useful agent.

Deterministic: the corpus, the tokenizer training (run single-threaded) and the weights depend only
on ``(size, seed)`` and arlkit's code, so the same command writes byte-identical files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.policies.protocol import Message
from arlkit.policies.quiet import quiet_progress

__all__ = [
    "CHATML_TEMPLATE", "TINY_SIZES", "TinySpec", "build_tiny_model", "build_tokenizer", "render_chatml", "save_model_dir",
]

CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
"""ChatML: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, then the assistant header."""

PAD_TOKEN = "<|endoftext|>"
BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)
TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
# Added (non-special) tokens: the action tags, and the one grid symbol outside ASCII, so that every
# grid cell is one token.
ADDED_TOKENS = (*TAG_TOKENS, "√")
# Characters of grid rows (FrozenLake: P _ O G; Sokoban: # _ O X √ P S). A character is isolated when
# everything after it up to the end of its line is grid characters too, i.e. inside a grid row.
_GRID_CHARS = "PGO_#X√S"
_GRID_SPLIT = f"[{_GRID_CHARS}](?=[{_GRID_CHARS}]*$)"


@dataclass(frozen=True)
class TinySpec:
    """Architecture of one tiny model size (a Qwen2 configuration).

    Attributes:
        hidden_size: model width.
        intermediate_size: SwiGLU inner width.
        num_hidden_layers: transformer blocks.
        num_attention_heads: query heads.
        num_key_value_heads: key/value heads (grouped-query attention).
    """

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int


TINY_SIZES: dict[str, TinySpec] = {
    "nano": TinySpec(128, 448, 4, 4, 2),
    "micro": TinySpec(320, 1152, 7, 8, 4),
    "small": TinySpec(768, 2048, 16, 12, 4),  # ~100M parameters: a GPU-sized check (scripts/gpu_check.sh)
}
MAX_POSITIONS = 8192
REPLY_TOKENS = 32
"""The model's default cap on tokens per reply (``generation_config.json`` ``max_new_tokens``, which
the ``hf`` backend uses when none is given): 4x the longest reply of the corpus (``<think>optimal
move</think><action>Left</action>`` plus the end of turn is 8 tokens of this tokenizer), so an
untrained model's full-history chat stays within :data:`MAX_POSITIONS` for a 70-turn FrozenLake
episode (~100 tokens a turn) instead of outgrowing it by turn 30 at 256 tokens a reply."""
MAX_VOCAB = 4096
"""Cap on the BPE vocabulary; arlkit's corpus has fewer distinct merges (~800 tokens result)."""
VOCAB_MULTIPLE = 64
"""The model's embedding table is the tokenizer's size rounded up to this multiple."""


def render_chatml(messages: Sequence[Message]) -> str:
    """One conversation in the tiny model's ChatML template, as its tokenizer is trained on it."""
    return "".join(f"{BOS_TOKEN}{m['role']}\n{m['content']}{EOS_TOKEN}\n" for m in messages)


# -- tokenizer ---------------------------------------------------------------------------------


# The pre-tokenizer regex of Qwen2's tokenizer. transformers 5 rebuilds a ``qwen2`` checkpoint's
# pre-tokenizer with it whatever tokenizer.json says, so the saved tokenizer uses it too: every
# transformers version then tokenizes the same way.
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _pre_tokenizer(isolate_grid: bool):  # type: ignore[no-untyped-def]
    from tokenizers import Regex, pre_tokenizers

    steps = [pre_tokenizers.Split(Regex(_GRID_SPLIT), behavior="isolated")] if isolate_grid else []
    steps += [
        pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]
    return pre_tokenizers.Sequence(steps)


def _segments(texts: Sequence[str]) -> Iterator[str]:
    """The texts cut at special and added tokens (which are never part of a merge)."""
    pattern = re.compile("|".join(re.escape(t) for t in (*SPECIAL_TOKENS, *ADDED_TOKENS)))
    for text in texts:
        yield from (piece for piece in pattern.split(text) if piece)


def build_tokenizer(texts: Sequence[str], vocab_size: int):  # type: ignore[no-untyped-def]
    """Train the byte-level BPE tokenizer (a ``tokenizers.Tokenizer``) on ``texts``.

    Training isolates the characters of grid rows, so no merge ever joins two cells; the saved
    pre-tokenizer is Qwen2's, under which a grid row then still falls apart into one token per cell.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = _pre_tokenizer(isolate_grid=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS),
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_segments(texts), trainer=trainer)
    tokenizer.pre_tokenizer = _pre_tokenizer(isolate_grid=False)
    tokenizer.add_tokens([AddedToken(tag, normalized=False, special=False) for tag in ADDED_TOKENS])
    return tokenizer


def _train_single_threaded(texts: Sequence[str], vocab_size: int):  # type: ignore[no-untyped-def]
    # The BPE trainer counts words in parallel; one thread rules out any order effect.
    saved = os.environ.get("RAYON_NUM_THREADS")
    os.environ["RAYON_NUM_THREADS"] = "1"
    try:
        return build_tokenizer(texts, vocab_size)
    finally:
        if saved is None:
            os.environ.pop("RAYON_NUM_THREADS", None)
        else:
            os.environ["RAYON_NUM_THREADS"] = saved


# -- model -------------------------------------------------------------------------------------


def _qwen2_config(spec: TinySpec, vocab_size: int, pad_id: int, bos_id: int, eos_id: int):  # type: ignore[no-untyped-def]
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        use_sliding_window=False,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
    )


def build_tiny_model(
    size: str, out_dir: str | Path, corpus: Sequence[str], seed: int = 0, *, overwrite: bool = False
) -> Path:
    """Build the tiny model ``size`` (``nano`` or ``micro``) into ``out_dir`` with a tokenizer trained on
    ``corpus`` and return its path (:func:`arlkit.rollout.corpus.init_tiny_model` passes arlkit's own
    prompts).

    The directory holds ``config.json``, ``generation_config.json``, ``model.safetensors`` and the
    tokenizer files (ChatML chat template included). Raises ``ValueError`` for an unknown size and
    ``FileExistsError`` when ``out_dir`` is a non-empty directory and ``overwrite`` is false. The
    files are written to a temporary directory first and moved into place, so an interrupted build
    leaves no half-written model behind.
    """
    if size not in TINY_SIZES:
        raise ValueError(f"unknown tiny model size {size!r}; valid choices: {', '.join(TINY_SIZES)}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out} exists and is not an empty directory (pass overwrite to replace it)")
    spec = TINY_SIZES[size]

    import torch
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2ForCausalLM

    raw = _train_single_threaded(corpus, MAX_VOCAB)
    vocab_size = -(-raw.get_vocab_size() // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        model_max_length=MAX_POSITIONS,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    ids = {tok: raw.token_to_id(tok) for tok in SPECIAL_TOKENS}
    config = _qwen2_config(spec, vocab_size, ids[PAD_TOKEN], ids[BOS_TOKEN], ids[EOS_TOKEN])

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[BOS_TOKEN], eos_token_id=ids[EOS_TOKEN], pad_token_id=ids[PAD_TOKEN],
        max_new_tokens=REPLY_TOKENS,
    )

    return save_model_dir(model, tokenizer, out)


def save_model_dir(model: Any, tokenizer: Any, out: Path) -> Path:
    """Write ``model`` and ``tokenizer`` as a directory ``from_pretrained`` loads, atomically: into a
    temporary sibling directory, renamed over ``out`` once complete (a kill never leaves half a model).

    The directory loads anywhere, without arlkit: files and folder get the usual permissions (0644 and
    0755 under the common umask; ``mkdtemp`` made them private), and ``tokenizer_config.json`` does not
    keep the ``local_files_only`` a loader passed (it would make every later load offline-only)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with quiet_progress():
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _drop_load_options(tmp / "tokenizer_config.json")
        _usual_permissions(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _drop_load_options(path: Path) -> None:
    if not path.is_file():
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(config, dict) and "local_files_only" in config:
        del config["local_files_only"]
        path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _usual_permissions(folder: Path) -> None:
    """The modes a plain ``mkdir`` / ``open`` would have given (0o777 / 0o666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
    folder.chmod(0o777 & ~umask)


def parameter_count(size: str, vocab_size: int) -> int:
    """Number of parameters of the tiny model ``size`` with ``vocab_size`` embedding rows (tied
    embeddings counted once)."""
    spec = TINY_SIZES[size]
    h, kv = spec.hidden_size, spec.hidden_size // spec.num_attention_heads * spec.num_key_value_heads
    attention = (h * h + h) + 2 * (h * kv + kv) + h * h
    mlp = 3 * h * spec.intermediate_size
    return vocab_size * h + spec.num_hidden_layers * (attention + mlp + 2 * h) + h
