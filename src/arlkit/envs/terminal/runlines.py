"""What a Dockerfile's ``RUN`` lines do, read without running them (:func:`read_run`): the packages
they install, the commands whose effect arlkit cannot make in the sandbox (downloads, builds,
programs run), and the files they make or change in ``/app``. A command is judged by its name: a
package manager's install, a download or a build, a file command (``mkdir``, ``cp``, ``sed -i``,
``>`` ...) by the paths it changes, and the commands that only set up users, locales and the
system's configuration, or only print, are harmless. Any other command is one whose effect is unknown.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

from arlkit.envs.terminal.testscripts import _REQUIREMENT

__all__ = ["APP", "Build", "in_app", "made_folders", "read_run"]

APP = "/app"


def in_app(path: str) -> str | None:
    """``path``'s place inside ``/app`` (``""`` for ``/app`` itself), or ``None`` outside it."""
    if path == APP:
        return ""
    return path[len(APP) + 1 :] if path.startswith(APP + "/") else None


@dataclass
class Build:
    """What a Dockerfile's image holds besides what it copies into ``/app``, each named once, in order."""

    base: str  # the image the last stage is built on
    apt: list[str] = field(default_factory=list)  # packages apt-get, apt, apk, yum or dnf install
    pip: list[str] = field(default_factory=list)  # packages pip or uv install (normalised names)
    runs: list[str] = field(default_factory=list)  # commands whose effect arlkit cannot make
    app_writes: list[str] = field(default_factory=list)  # commands that make or change files in /app
    elsewhere: list[str] = field(default_factory=list)  # files COPY, ADD and RUN lines put outside /app
    entrypoint: str = ""  # a program the image starts with the container

    def add(self, what: str, item: str) -> None:
        items = getattr(self, what)
        if item not in items:
            items.append(item)


# -- splitting a script into commands -----------------------------------------------------------------
_SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "{", "}", "|&", ";;"}
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "time", "sudo", "nohup", "exec"}
_ENDS = {"fi", "done", "esac"}
_QUERIES = {
    "true", ":", "false", "test", "[", "[[", "]]", "echo", "printf", "cat", "ls", "head", "tail", "grep", "which", "type",
    "uname", "id", "whoami", "env", "printenv", "sleep", "wc", "sort", "date", "pwd", "export", "set", "unset", "umask",
    "source", ".", "hash", "ulimit", "exit", "command", "nproc", "arch", "dpkg-architecture", "lsb_release",
}
"""Commands that change nothing but the files they are redirected to."""
_SYSTEM = {
    "useradd", "groupadd", "adduser", "addgroup", "usermod", "userdel", "groupdel", "deluser", "passwd", "chpasswd",
    "locale-gen", "update-locale", "localedef", "ldconfig", "update-alternatives", "update-ca-certificates",
    "dpkg-reconfigure", "debconf-set-selections", "add-apt-repository", "apt-key", "systemctl", "update-rc.d",
    "service", "virtualenv",
}
"""Commands that set up users, locales or the system's own configuration: nothing a task's commands use."""
_WRITERS = {"mkdir", "touch", "rm", "rmdir", "chmod", "chown", "chgrp", "truncate", "ln", "cp", "mv", "install", "tee",
            "sed", "tar", "unzip", "gunzip", "gzip", "dos2unix", "unix2dos", "find"}
"""Commands judged by the files they change."""
_CONTENT = {"touch", "truncate", "cp", "mv", "install", "tee", "sed", "tar", "unzip", "gunzip", "gzip", "dos2unix",
            "unix2dos"}
"""Those of them that give a file content: outside /app as much as inside, a file the sandbox lacks.
The others (folders, modes, owners, links, removals) are harmless outside /app."""
_OWN_FILES = ("/root/.", "/dev/", "/etc/apt/", "/etc/pip.conf", "/etc/locale.gen", "/etc/timezone", "/etc/localtime")
"""Places whose files set up the image's own shell, installers or locale: nothing a task reads."""
_FETCHERS = {"curl", "wget", "aria2c", "svn", "hg", "rsync", "scp", "git", "npm", "npx", "yarn", "pnpm", "gem", "cargo",
             "go", "rustup", "nvm", "conda", "mamba", "micromamba", "pipx", "bundle", "composer", "mvn", "gradle",
             "dotnet", "sdk", "brew", "cpan", "cpanm", "luarocks", "opam", "cabal", "stack", "dpkg"}
_SUBCOMMANDS = {"git", "npm", "yarn", "pnpm", "gem", "cargo", "go", "conda", "mamba", "micromamba", "dotnet", "dpkg",
                "bundle", "composer", "brew", "opam", "cabal", "stack", "pipx", "rustup", "sdk"}
_PIP_VALUED = {"--index-url", "-i", "--extra-index-url", "--python", "-p", "--find-links", "-f", "--root-user-action",
               "--default-index", "--index", "--retries", "--timeout", "--trusted-host", "--prefix", "--target", "-t",
               "--root", "--src", "--platform", "--python-version", "--only-binary", "--no-binary", "--progress-bar",
               "--log", "--cache-dir", "--config-settings", "-C", "--implementation", "--abi", "--proxy"}
_VERSIONS = {"--version", "-version", "-V", "version", "-v", "--help"}
_APT = {"apt-get": "install", "apt": "install", "aptitude": "install", "apk": "add", "yum": "install", "dnf": "install",
        "microdnf": "install", "zypper": "install"}
_PACKAGING = {"pip", "setuptools", "wheel", "uv", "virtualenv"}


def _split(script: str) -> list[tuple[list[str], list[str]]] | None:
    """``(words, files written by redirection)`` of each simple command of a shell script; ``None``
    when it cannot be read (a quote left open)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out: list[tuple[list[str], list[str]]] = []
    words: list[str] = []
    writes: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _SEPARATORS:
            if words or writes:
                out.append((words, writes))
            words, writes = [], []
        elif set(token) <= set("<>&|") and ("<" in token or ">" in token):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if words and words[-1].isdigit():
                words.pop()  # 2>/dev/null
            if ">" in token and not token.endswith("&") and not target.startswith("/dev/"):
                writes.append(target)
            i += 1
        else:
            words.append(token)
        i += 1
    if words or writes:
        out.append((words, writes))
    return out


def _strip(words: list[str]) -> list[str]:
    """``words`` without the variables, keywords and wrappers before the command (``DEBIAN_FRONTEND=x``,
    ``then``, ``sudo``); ``[]`` for the end of a compound command."""
    while words and (words[0] in _KEYWORDS or re.match(r"^\w+=", words[0])):
        words = words[1:]
    if words and words[0] == "env":
        words = words[1:]
        while words and (words[0].startswith("-") or re.match(r"^\w+=", words[0])):
            words = words[1:]
    if not words or words[0] in _ENDS or words[0] == "for" or words[0] == "in":
        return []
    return words


def _path(word: str, cwd: str | None) -> str | None:
    """Where a path argument points (``~`` is root's home), or ``None`` when it cannot be known."""
    if word.startswith("~"):
        word = "/root" + word[1:]
    word = re.sub(r"^\$\{?HOME\}?", "/root", word)
    if "$" in word or "`" in word:  # a variable: outside /app unless it starts there
        return APP + "/?" if word.startswith(APP) else "/?"
    if word.startswith("/"):
        return posixpath.normpath(word)
    return None if cwd is None else posixpath.normpath(posixpath.join(cwd, word))


def _targets(name: str, args: list[str]) -> list[str]:
    """The paths a file command changes."""
    plain = [a for a in args if not a.startswith("-")]
    if name in ("cp", "mv", "ln", "install"):
        return plain[-1:]
    if name in ("chmod", "chown", "chgrp"):
        return plain[1:]
    if name == "sed":
        return plain[1:] if any(a.startswith("-i") or a == "--in-place" for a in args) else []
    if name == "tar":
        at = next((i for i, a in enumerate(args) if a in ("-C", "--directory")), None)
        return [args[at + 1]] if at is not None and at + 1 < len(args) else ["."]
    if name == "unzip":
        return [args[args.index("-d") + 1]] if "-d" in args[:-1] else ["."]
    if name == "find":
        return plain[:1] if {"-delete", "-exec", "-execdir"} & set(args) else []
    if name == "truncate":
        return [a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] not in ("-s", "--size")]
    return plain


def made_folders(script: str, workdir: str | None) -> list[str]:
    """The folders under ``/app`` that the ``mkdir`` commands of a ``RUN`` script make."""
    made: list[str] = []
    cwd = workdir
    for raw, _ in _split(script) or []:
        words = _strip(raw)
        if words[:1] == ["cd"]:
            cwd = _path(words[1], cwd) if len(words) > 1 else "/root"
        elif words[:1] == ["mkdir"]:
            for target in _targets("mkdir", words[1:]):
                place = _path(target, cwd)
                if place is not None and place != APP and in_app(place) is not None and not place.endswith("?"):
                    made += [folder for folder in _app_folders(place) if folder not in made]
    return made


def _app_folders(place: str) -> list[str]:
    """``place`` and the folders between ``/app`` and it, outermost first (``mkdir -p``)."""
    parts = place[len(APP) + 1:].split("/")
    return [APP + "/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def read_run(build: Build, script: str, workdir: str | None) -> None:
    """Adds what one ``RUN`` script does to ``build``."""
    commands = _split(script)
    if commands is None:
        build.add("runs", "a RUN line arlkit cannot read")
        return
    cwd = workdir
    for raw, writes in commands:
        words = _strip(raw)
        text = " ".join(words)[:60]
        for target in writes:
            place = _path(target, cwd)
            if place is not None and in_app(place) is not None and place != APP:
                build.add("app_writes", f"{words[0] if words else ''} > {place}".strip())
            elif place is not None and in_app(place) is None and not place.startswith(_OWN_FILES) and place != "/?":
                build.add("elsewhere", place)
        if not words:
            continue
        name = posixpath.basename(words[0])
        args = words[1:]
        name = re.sub(r"^(python|pip)3?(\.\d+)?$", r"\1", name)
        if name == "cd":
            cwd = _path(args[0], cwd) if args else "/root"
        elif args and all(a in _VERSIONS for a in args):
            continue  # asks a command its version
        elif name in _APT:
            _read_apt(build, name, args, text)
        elif name == "pip" or (name == "python" and args[:2] == ["-m", "pip"]) or (name == "uv" and args[:1] == ["pip"]):
            _read_pip(build, args[2:] if name == "python" else args[1:] if name == "uv" else args)
        elif name == "uv" and args[:1] == ["add"]:
            _read_pip(build, args)
        elif (name == "python" and args[:2] in (["-m", "venv"], ["-m", "virtualenv"], ["-m", "ensurepip"])) or \
                (name == "uv" and args[:1] == ["venv"]):
            continue
        elif name == "git" and args[:1] == ["config"]:
            continue
        elif name in _QUERIES or name in _SYSTEM or (name == "apt-get" and not args):
            continue
        elif name in _WRITERS:
            places = [_path(t, cwd) for t in _targets(name, args)]
            if name == "mkdir" and all(p is not None and not p.endswith("?") for p in places):
                continue  # app_files makes the folders in /app
            inside = [p or "?" for p in places if p is None or (in_app(p) is not None and p != APP)]
            if inside:
                build.add("app_writes", f"{name} {' '.join(inside)}"[:80])
            elif name in _CONTENT:
                for place in places:
                    if place and not place.startswith(_OWN_FILES) and place != "/?":
                        build.add("elsewhere", place)
        elif name in _FETCHERS:
            build.add("runs", " ".join([name, *[a for a in args if not a.startswith("-")][:1]])
                      if name in _SUBCOMMANDS else name)
        else:
            first = next((a for a in args if not a.startswith("-")), "")
            build.add("runs", f"{name} {posixpath.basename(first)}"[:40] if re.match(r"^[\w./+-]+$", first) else name)


def _read_apt(build: Build, name: str, args: list[str], text: str) -> None:
    """Adds the packages of an ``apt-get install`` (or ``apk add`` ...) to ``build``."""
    plain = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in ("-o", "-t"))]
    if not plain or plain[0] != _APT[name]:
        if plain and plain[0] not in ("update", "clean", "autoclean", "autoremove", "upgrade", "dist-upgrade",
                                      "full-upgrade", "purge", "remove", "del", "makecache", "cache"):
            build.add("runs", f"{name} {plain[0]}")
        return
    for package in plain[1:]:
        if "/" in package or package.endswith(".deb") or "$" in package:
            build.add("runs", text)  # a local .deb, a variable
        else:
            build.add("apt", re.split(r"[=:]", package)[0])


def _read_pip(build: Build, args: list[str]) -> None:
    """Adds the packages of a ``pip install`` or ``uv add`` (``args``: from the verb on) to ``build``;
    a requirements file, an editable or a path or URL is a build of its own."""
    if not args or args[0] not in ("install", "add"):
        if args and args[0] in ("download", "wheel"):
            build.add("runs", f"pip {args[0]}")
        return
    j, args = 0, args[1:]
    while j < len(args):
        word = args[j]
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            if flag in ("-r", "--requirement", "-e", "--editable", "-c", "--constraint"):
                build.add("runs", f"pip install {word} {args[j + 1] if j + 1 < len(args) else ''}".strip())
                j += 2
                continue
            j += 2 if flag in _PIP_VALUED and "=" not in word else 1
            continue
        match = _REQUIREMENT.match(word)
        if match is None:
            build.add("runs", f"pip install {word}"[:60])  # a path, a URL, a project folder
        elif re.sub(r"[-_.]+", "-", match.group(1)).lower() not in _PACKAGING:
            build.add("pip", re.sub(r"[-_.]+", "-", match.group(1)).lower())
        j += 1
