"""A task's Dockerfile, read without Docker: what its image puts in ``/app`` (the task folder's
starting contents) and what else the image holds that the sandbox may not
(docs/environments.md#terminal).

Only the last build stage counts (it is the image), with the stages it is built ``FROM``. ``WORKDIR``
is followed, from the base image's own (``/app`` for Terminal-Bench's base images, ``/`` for others),
so a relative destination lands where Docker puts it; ``COPY`` and ``ADD`` of files and folders of
the build context are followed when their destination is ``/app`` or under it. When a ``COPY`` or
``ADD`` into ``/app`` cannot be followed (``--from`` another stage, a URL, an archive ``ADD`` would
unpack, a heredoc, a variable, a source that is not in the context) the folder cannot be known, and
:func:`app_files` says so with ``None``.

:func:`read_build` says what the rest of the Dockerfile does (:class:`Build`): the base image, the
packages its ``RUN`` lines install (``apt-get``, ``apk``, ``pip``, ``uv``), the commands whose effect
arlkit cannot make (downloads, builds, programs run), the commands that make or change files in
``/app``, the places outside ``/app`` it copies files to, and its ``ENTRYPOINT``. Whether the sandbox
has what they need is :mod:`~arlkit.envs.terminal.formats`'s to decide.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path

from arlkit.envs.terminal.runlines import APP, Build, in_app, made_folders, read_run

__all__ = ["APP", "Build", "app_files", "base_image", "read_build"]

_KEPT_FLAGS = ("--chown", "--chmod", "--link")  # they change owners and modes only, which arlkit normalises
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")
_HEREDOC = re.compile(r"(?<!<)<<(-?)\s*([\"']?)([A-Za-z_][\w.-]*)\2")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^git@")


# -- reading the instructions ------------------------------------------------------------------------
def _instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` of each instruction, continuation lines joined and comments dropped.
    A heredoc's body is left out of its instruction's arguments, except for ``RUN <<EOF`` (a script
    given whole), whose arguments are the body."""
    out: list[tuple[str, str]] = []
    lines = iter(text.splitlines())
    pending = ""
    for raw in lines:
        line = raw.strip()
        if line.startswith("#") or (not line and pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole, pending = (pending + line).strip(), ""
        if not whole:
            continue
        keyword, _, args = whole.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword in ("RUN", "COPY", "ADD"):
            bodies = []
            for _dash, _quote, word in _HEREDOC.findall(args):
                body = []
                for rest in lines:
                    if rest.strip() == word:
                        break
                    body.append(rest)
                bodies.append("\n".join(body))
            if keyword == "RUN" and bodies and _HEREDOC.match(re.sub(r"^(--\S+\s+)*", "", args)):
                args = bodies[0]  # RUN <<EOF: the body is the script
        out.append((keyword, args))
    if pending.strip():
        keyword, _, args = pending.strip().partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def _from(args: str) -> tuple[str, str]:
    """``(image, stage name)`` of a ``FROM`` line (``--platform`` left out)."""
    words = [w for w in args.split() if not w.startswith("--")]
    image = words[0] if words else ""
    name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else ""
    return image, name.lower()


def _image_chain(text: str) -> tuple[str, list[tuple[str, str]], set[str]]:
    """The image the last stage is built on (through the stages it names), that stage's instructions
    after the instructions of the stages it is built on, and the names of all stages."""
    stages: list[tuple[str, str, list[tuple[str, str]]]] = []
    for keyword, args in _instructions(text):
        if keyword == "FROM":
            image, name = _from(args)
            stages.append((image, name, []))
        elif stages:
            stages[-1][2].append((keyword, args))
    if not stages:
        return "", [], set()
    names = {name for _, name, _ in stages if name}
    chain = [stages[-1]]
    while chain[0][0].lower() in names and len(chain) <= len(stages):
        chain.insert(0, next(s for s in stages if s[1] == chain[0][0].lower()))
    return chain[0][0], [i for stage in chain for i in stage[2]], names


# -- the base image -------------------------------------------------------------------------------------
_REGISTRIES = ("docker.io/library/", "docker.io/", "index.docker.io/library/", "public.ecr.aws/docker/library/",
               "mirror.gcr.io/library/", "library/")
_PLAIN = {"ubuntu", "debian", "python", "buildpack-deps", "alpine", "bash"}
_TBENCH = "ghcr.io/laude-institute/t-bench/"
_TBENCH_PLAIN = {"ubuntu-24-04", "python-3-13"}  # ubuntu:24.04 or python:3.13 with tmux and asciinema, WORKDIR /app
_TOOLCHAINS = {
    "golang": "go", "node": "node", "gcc": "gcc", "eclipse-temurin": "java", "openjdk": "java", "amazoncorretto": "java",
    "maven": "mvn", "gradle": "gradle", "rust": "cargo", "ruby": "ruby", "php": "php", "perl": "perl", "julia": "julia",
    "haskell": "ghc", "swift": "swift", "r-base": "R", "erlang": "erl", "elixir": "elixir",
    "mcr.microsoft.com/dotnet/sdk": "dotnet",
}
"""Official images of a language's toolchain, and the command that must be here in their place."""


def base_image(image: str) -> tuple[bool, str]:
    """``(known, command)`` for a ``FROM`` image: a plain system image (``ubuntu``, ``debian``,
    ``python``, Terminal-Bench's base images ...) is known and needs no command; an official
    toolchain image (``golang``, ``node``, ``eclipse-temurin`` ...) needs its command; any other is
    not known (a task's own image)."""
    name = image.lower()
    for prefix in _REGISTRIES:
        name = name.removeprefix(prefix)
    name = name.split("@")[0]
    name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    if name.startswith(_TBENCH):
        return name.removeprefix(_TBENCH) in _TBENCH_PLAIN, ""
    if name in _PLAIN:
        return True, ""
    return (True, _TOOLCHAINS[name]) if name in _TOOLCHAINS else (False, "")


def _default_workdir(image: str) -> str:
    return APP if image.lower().startswith(_TBENCH) else "/"


# -- what COPY and ADD put in /app ---------------------------------------------------------------------
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


def _workdir(current: str | None, args: str) -> str | None:
    return None if "$" in args or current is None else posixpath.normpath(posixpath.join(current, args))


def app_files(context: Path, dockerfile: Path | None = None) -> list[tuple[Path | None, str]] | None:
    """What ``dockerfile`` (default ``context/Dockerfile``) copies into ``/app`` from ``context``
    (its build context): ``(source, place under /app)`` in order, a folder's contents going into its
    place, and ``(None, place)`` for an empty folder a ``RUN mkdir`` makes there; ``[]`` without a
    Dockerfile; ``None`` when some ``COPY`` or ``ADD`` into ``/app`` cannot be followed."""
    dockerfile = dockerfile or context / "Dockerfile"
    if not dockerfile.is_file():
        return []
    base, instructions, _ = _image_chain(dockerfile.read_text(encoding="utf-8", errors="replace"))
    files: list[tuple[Path | None, str]] = []
    workdir: str | None = _default_workdir(base)
    folders = {"/", workdir}
    for keyword, args in instructions:
        if keyword == "WORKDIR":
            workdir = _workdir(workdir, args)
            folders.add(workdir or "/")
        elif keyword == "RUN":
            for made in made_folders(_run_script(args), workdir):
                files.append((None, made[len(APP) + 1:]))
                folders.add(made)
        elif keyword in ("COPY", "ADD"):
            parsed = _copy_arguments(args)
            if parsed is None or len(parsed[1]) < 2:
                return None  # where it copies to is unknown
            flags, (*sources, dest) = parsed
            if "$" in dest or (workdir is None and not dest.startswith("/")):
                return None
            target = posixpath.normpath(posixpath.join(workdir or "/", dest))
            place = in_app(target)
            if place is None:
                continue  # outside the task folder
            if any(flag.split("=")[0] not in _KEPT_FLAGS for flag in flags):
                return None  # --from another stage, --parents, --exclude ...
            into = dest.endswith("/") or target in folders or len(sources) > 1
            for source in sources:
                if keyword == "ADD" and (_URL.match(source) or source.lower().endswith(_ARCHIVES)):
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


# -- what the rest of the Dockerfile does ----------------------------------------------------------------
def read_build(context: Path, dockerfile: Path | None = None) -> Build | None:
    """What ``dockerfile`` (default ``context/Dockerfile``) builds; ``None`` without one."""
    dockerfile = dockerfile or context / "Dockerfile"
    if not dockerfile.is_file():
        return None
    base, instructions, stages = _image_chain(dockerfile.read_text(encoding="utf-8", errors="replace"))
    build = Build(base)
    workdir: str | None = _default_workdir(base)
    for keyword, args in instructions:
        if keyword == "WORKDIR":
            workdir = _workdir(workdir, args)
        elif keyword == "RUN":
            read_run(build, _run_script(args), workdir)
        elif keyword in ("COPY", "ADD"):
            parsed = _copy_arguments(args)
            if parsed is None or len(parsed[1]) < 2:
                continue  # app_files says the folder is unknown
            flags, (*sources, dest) = parsed
            target = posixpath.normpath(posixpath.join(workdir or "/", dest))
            if keyword == "ADD" and any(_URL.match(s) for s in sources):
                build.add("runs", "ADD " + next(s for s in sources if _URL.match(s)))
            elif in_app(target) is None and not target.startswith(("/tests", "/logs")):
                froms = [f.split("=", 1)[1] for f in flags if f.startswith("--from=")]
                build.add("elsewhere", target if not froms or froms[0].lower() not in stages
                          else f"{target} (from the stage {froms[0]})")
        elif keyword == "ENTRYPOINT":
            build.entrypoint = _entrypoint(args)
    return build


def _run_script(args: str) -> str:
    """The shell text of a ``RUN`` line (its exec form joined, its ``--mount`` and like flags left out)."""
    args = re.sub(r"^(--\S+\s+)*", "", args.strip())
    if args.startswith("["):
        try:
            words = json.loads(args)
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                shell = len(words) == 3 and posixpath.basename(words[0]) in ("sh", "bash") and words[1] == "-c"
                return words[2] if shell else shlex.join(words)
        except ValueError:
            pass
    return args


def _entrypoint(args: str) -> str:
    """The program an ``ENTRYPOINT`` starts, ``""`` for a plain shell."""
    try:
        words = json.loads(args) if args.strip().startswith("[") else shlex.split(args)
    except ValueError:
        return args
    if not isinstance(words, list) or not words:
        return ""
    shells = {"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/env", "-c", "-l", "-lc", "--login", "-i"}
    return "" if all(str(w) in shells for w in words) else " ".join(str(w) for w in words)
