"""What a task's Dockerfile copies into ``/app``, read without Docker (a Harbor task's starting folder).

Only the last build stage counts (it is the image). ``WORKDIR`` is followed, so a relative destination
lands where Docker puts it; ``COPY`` and ``ADD`` of files and folders of the build context are
followed when their destination is ``/app`` or under it. Everything else the Dockerfile does (``RUN``
lines, files from the base image, destinations outside ``/app``) is not there. When a ``COPY`` or
``ADD`` into ``/app`` cannot be followed (``--from`` another stage, a URL, an archive ``ADD`` would
unpack, a heredoc, a variable, a source that is not in the context) the folder cannot be known, and
:func:`app_files` says so with ``None``.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path

__all__ = ["APP", "app_files"]

APP = "/app"
_KEPT_FLAGS = ("--chown", "--chmod", "--link")  # they change owners and modes only, which arlkit normalises
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` of each instruction, continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, args = whole.partition(" ")
            out.append((keyword.upper(), args.strip()))
    if pending.strip():
        keyword, _, args = pending.strip().partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def _copy_arguments(args: str) -> tuple[list[str], list[str]] | None:
    """The flags and the other arguments (sources then destination) of a ``COPY`` or ``ADD``; ``None``
    for a form not followed (a heredoc, malformed JSON or quoting)."""
    flags = []
    rest = args.strip()
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.strip()
    if "<<" in rest:
        return None
    try:
        if rest.startswith("["):
            parts = json.loads(rest)
            if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
                return None
        else:
            parts = shlex.split(rest)
    except ValueError:
        return None
    return flags, parts


def _sources(context: Path, source: str) -> list[Path]:
    """The context's paths ``source`` names (its wildcards expanded); empty when it names none or
    leaves the context."""
    relative = posixpath.normpath(source.lstrip("/")) if source.strip("/") else "."
    if relative == ".." or relative.startswith("../"):
        return []
    if any(c in relative for c in "*?["):
        found = sorted(context.glob(relative))
    else:
        found = [context / relative] if (context / relative).exists() or (context / relative).is_symlink() else []
    root = context.resolve()
    return [p for p in found if p.resolve() == root or root in p.resolve().parents]


def _in_app(path: str) -> str | None:
    """``path``'s place inside ``/app`` (``""`` for ``/app`` itself), or ``None`` outside it."""
    if path == APP:
        return ""
    return path[len(APP) + 1 :] if path.startswith(APP + "/") else None


def app_files(context: Path) -> list[tuple[Path, str]] | None:
    """What ``context/Dockerfile``'s last stage copies into ``/app`` from ``context`` (its build
    context): ``(source, place under /app)`` in order, a folder's contents going into its place;
    ``[]`` without a Dockerfile; ``None`` when some ``COPY`` or ``ADD`` into ``/app`` cannot be followed."""
    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file():
        return []
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    files: list[tuple[Path, str]] = []
    workdir: str | None = "/"
    folders = {"/"}
    for keyword, args in _instructions(text):
        if keyword == "FROM":
            files, workdir, folders = [], "/", {"/"}
        elif keyword == "WORKDIR":
            workdir = None if "$" in args or workdir is None else posixpath.normpath(posixpath.join(workdir, args))
            if workdir:
                folders.add(workdir)
        elif keyword in ("COPY", "ADD"):
            parsed = _copy_arguments(args)
            if parsed is None or len(parsed[1]) < 2:
                return None  # where it copies to is unknown
            flags, (*sources, dest) = parsed
            if "$" in dest or (workdir is None and not dest.startswith("/")):
                return None
            target = posixpath.normpath(posixpath.join(workdir or "/", dest))
            place = _in_app(target)
            if place is None:
                continue  # outside the task folder
            if any(flag.split("=")[0] not in _KEPT_FLAGS for flag in flags):
                return None  # --from another stage, --parents, --exclude ...
            into = dest.endswith("/") or target in folders or len(sources) > 1
            for source in sources:
                if keyword == "ADD" and (re.match(r"^[a-z][a-z0-9+.-]*://", source) or source.startswith("git@")
                                         or source.lower().endswith(_ARCHIVES)):
                    return None
                found = _sources(context, source)
                if not found or "$" in source:
                    return None
                into = into or len(found) > 1
                for path in found:
                    if path.is_dir() and not path.is_symlink():
                        files.append((path, place))
                        folders.add(target)
                    else:
                        files.append((path, posixpath.join(place, path.name) if into else place))
            if into:
                folders.add(target)
    return files
