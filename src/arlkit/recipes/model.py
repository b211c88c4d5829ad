"""``arlkit model init`` and ``arlkit serve``: the embedded tiny model built offline, and a local model
behind an OpenAI-compatible API on a loopback address."""

from __future__ import annotations

from pathlib import Path

from arlkit.config import ConfigError
from arlkit.extras import install_hint
from arlkit.policies.tiny import TINY_SIZES
from arlkit.rollout.corpus import init_tiny_model
from arlkit.rundir import disk_full_named

__all__ = ["init_model", "serve_model", "tiny_sizes"]


def tiny_sizes() -> list[str]:
    """The tiny model's sizes, sorted (``micro``, ``nano``)."""
    return sorted(TINY_SIZES)


def init_model(size: str, out: str | Path, seed: int = 0, *, overwrite: bool = False) -> Path:
    """Build the tiny model ``size`` into ``out`` and return its path (:func:`arlkit.rollout.corpus.init_tiny_model`:
    ``FileExistsError`` when ``out`` holds files and ``overwrite`` is off); a full disk, however a library
    wraps it, is an ``OSError`` naming ``out``."""
    with disk_full_named(Path(out)):
        return init_tiny_model(size, out, seed, overwrite=overwrite)


def serve_model(model_dir: str, name: str | None, host: str, port: int) -> int:
    """Serve ``model_dir`` as ``name`` at ``host:port`` until Ctrl-C (:mod:`arlkit.policies.serve`); a bad
    model folder or address, or the serve extra missing, is a :class:`~arlkit.config.ConfigError`."""
    try:
        from arlkit.policies.serve import serve
    except ImportError as exc:
        raise ConfigError(f"arlkit serve needs Starlette and uvicorn ({exc.name} is missing): "
                          f"{install_hint('serve')}") from None

    def refuse(message: str) -> None:
        raise ConfigError(message)

    return serve(model_dir, name, host, port, exit_with=refuse)
