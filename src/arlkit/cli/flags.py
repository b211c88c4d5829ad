"""Command-line flags declared against config fields, so they cannot drift from the configs.

A :class:`Flag` names the dotted field it sets (``--budget-mode`` -> ``prompt.budget_mode``); the
parser takes its choices (``Literal`` fields) and its default for the help text from the config class,
and every flag defaults to "not given": :func:`flag_overrides` returns only the flags given, as dotted
overrides for :func:`arlkit.config.load_config`, so flags override a config file key by key and the
defaults stay those of the dataclasses. ``tests/cli/test_cli_flags.py`` checks that every flag names a
field and every field has a flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from arlkit.config import config_from_dict, parse_key_values
from arlkit.recipes.catalog import SamplingConfig

__all__ = [
    "BACKEND_FLAGS",
    "SAMPLING_FLAGS",
    "Flag",
    "add_flags",
    "add_sampling_arguments",
    "field_default",
    "field_type",
    "flag_overrides",
    "nested",
    "sampling_from_args",
]


@dataclass(frozen=True)
class Flag:
    """One option of a command and the config field it sets.

    Attributes:
        option: the option, ``--max-active``.
        field: the dotted field of the command's config, ``max_active``, ``prompt.history``.
        help: the help text (the default is appended).
        kind: ``value`` (one value), ``list`` (comma-separated values), ``append`` (repeatable, one value
            each), ``mapping`` (repeatable ``KEY=VALUE``: the entries of a mapping field) or ``switch``
            (``--x`` / ``--no-x``).
        metavar: the value's name in the help.
    """

    option: str
    field: str
    help: str
    kind: Literal["value", "list", "append", "mapping", "switch"] = "value"
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.option.lstrip("-").replace("-", "_")


def nested(prefix: str, flags: Sequence[Flag]) -> tuple[Flag, ...]:
    """``flags`` of a section's config class, as flags of the config holding it in field ``prefix``."""
    return tuple(dataclasses.replace(f, field=f"{prefix}.{f.field}") for f in flags)


def field_type(cls: type, path: str) -> Any:
    """The annotation of the dotted field ``path`` of the dataclass ``cls``; KeyError if there is none."""
    tp: Any = cls
    for part in path.split("."):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            raise KeyError(path)
        tp = typing.get_type_hints(tp)[part]
    return tp


def field_default(cls: type, path: str) -> Any:
    """The default value of the dotted field ``path`` of ``cls`` (from ``cls()``)."""
    value: Any = cls()
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _shown(value: Any) -> str | None:
    if value is None or value == {} or value == ():
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return text.replace("%", "%%")


def add_flags(parser: argparse.ArgumentParser, cls: type, flags: Sequence[Flag]) -> None:
    """Add ``flags`` of the config class ``cls`` to ``parser`` (all default to None: not given)."""
    for flag in flags:
        tp = field_type(cls, flag.field)
        default = _shown(field_default(cls, flag.field))
        text = flag.help + (f" (default {default})" if default is not None and flag.kind != "mapping" else "")
        kwargs: dict[str, Any] = {"dest": flag.dest, "default": None, "help": text}
        if flag.kind == "switch":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["metavar"] = flag.metavar
            if flag.kind in ("append", "mapping"):
                kwargs["action"] = "append"
            if typing.get_origin(tp) is Literal:
                kwargs["choices"] = [str(c) for c in typing.get_args(tp)]
        parser.add_argument(flag.option, **kwargs)


def flag_overrides(args: argparse.Namespace, flags: Sequence[Flag]) -> dict[str, Any]:
    """The dotted overrides of the flags given (values are strings or tuples of strings, for
    :func:`arlkit.config.load_config` with ``parse_values=False``: the field types convert them)."""
    out: dict[str, Any] = {}
    for flag in flags:
        value = getattr(args, flag.dest)
        if value is None:
            continue
        if flag.kind == "mapping":
            for key, item in parse_key_values(value, option=flag.option).items():
                out[f"{flag.field}.{key}"] = item
        elif flag.kind == "list":
            out[flag.field] = tuple(v.strip() for v in value.split(",") if v.strip())
        elif flag.kind == "append":
            out[flag.field] = tuple(value)
        else:
            out[flag.field] = value
    return out


SAMPLING_FLAGS = (
    Flag("--temperature", "temperature", "sampling temperature (0 = greedy)"),
    Flag("--top-p", "top_p", "nucleus sampling mass"),
    Flag("--top-k", "top_k", "top-k sampling (0 = off)"),
    Flag("--max-new-tokens", "max_new_tokens",
         "cap on tokens per reply (default: the model's generation config, 32 for the embedded tiny model; else 256)"),
)
"""Sampling options of every command that runs an LLM policy (:class:`~arlkit.policies.SamplingConfig`)."""

BACKEND_FLAGS = (
    Flag("--request-timeout", "request_timeout",
         "openai: seconds one HTTP attempt may take in all, connect to last byte (default 60)", metavar="SECONDS"),
    Flag("--max-retries", "max_retries",
         "openai: further attempts after a 429, 5xx, timeout, dropped connection or malformed reply (default 4)"),
    Flag("--retry-backoff", "retry_backoff", "openai: seconds before the first retry, doubled each time (default 0.5)",
         metavar="SECONDS"),
    Flag("--api-key-env", "api_key_env", "openai: the environment variable holding the API key (default "
         "OPENAI_API_KEY; a placeholder key when it is unset)", metavar="NAME"),
    Flag("--context-length", "context_length", "context window (prompt + reply); hf: at most the model's own "
         "(default); openai: the server's, when known", metavar="TOKENS"),
)
"""Timeouts, retries and the context window of LLM backends (:class:`~arlkit.policies.BackendOptions`)."""



def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """The sampling options (:data:`SAMPLING_FLAGS`)."""
    add_flags(parser, SamplingConfig, SAMPLING_FLAGS)


def sampling_from_args(args: argparse.Namespace) -> SamplingConfig:
    """The :class:`SamplingConfig` of parsed sampling options (validated; options not given keep the defaults)."""
    return config_from_dict(SamplingConfig, flag_overrides(args, SAMPLING_FLAGS), where="sampling")
