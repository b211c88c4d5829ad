"""The file system a program sees at the namespaced levels: an allow-list on an empty root.

Nothing of the host is visible unless it is on this list (``docs/sandbox.md``, "What a program
sees"):

- the system folders ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` (symlinks kept as symlinks), read-only;
- of ``/etc`` only ``ld.so.cache``, ``localtime``, ``alternatives`` and Debian's ``python3*``
  folders, plus a synthetic ``passwd``, ``group``, ``hosts`` and ``nsswitch.conf`` that name
  the sandbox user only;
- the interpreters' prefixes (a venv and the Python it was made from): their ``bin`` and ``lib*``
  folders and ``pyvenv.cfg``, read-only, never the folder around them (a checkout holding a venv
  stays outside);
- inside those, every installed copy of arlkit and of the ``hide_packages`` (the package folder
  or module, its ``.dist-info``, an editable install's ``.pth`` and finder) and every
  ``hide_paths`` folder is masked by an empty folder or file, so another checkout's task data, or
  the generator a task set comes from, cannot be reached through ``site-packages``;
- the level's own ``/dev``, ``/proc``, and size-capped tmpfs scratch folders.

This module computes that view as a list of operations; :mod:`arlkit.sandbox.isolation` turns it
into bubblewrap arguments or a launcher spec.
"""

from __future__ import annotations

import functools
import glob
import os
import sys
import threading
from pathlib import Path

__all__ = ["Op", "etc_files", "interpreter_prefixes", "is_arlkit_entry", "is_package_entry", "order_ops", "system_view"]

Op = tuple  # ("dir", path) | ("symlink", target, path) | ("bind", source, path) | ("mask", path, "dir" | "file")
"""One step of building the view; see :func:`order_ops` for the kinds."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ALLOWED = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")
ETC_GLOBS = ("/etc/python3*",)
PREFIX_PARTS = ("bin", "lib", "lib32", "lib64", "libx32", "pyvenv.cfg")
_SITE_GLOBS = ("lib*/python*/site-packages", "lib*/python*/dist-packages", "local/lib*/python*/*-packages")
_KIND_ORDER = {"tmpfs": 0, "dev": 0, "proc": 0, "dir": 1, "symlink": 2, "bind": 3, "mask": 4}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def interpreter_prefixes(python: str) -> list[str]:
    """The installation prefixes ``python`` needs: the one of its path (a venv), the one of its
    real path and the ``home`` of its ``pyvenv.cfg`` (the Python the venv was made from), and for
    the running interpreter ``sys.prefix`` and ``sys.base_prefix``."""
    prefixes = {os.path.dirname(os.path.dirname(os.path.abspath(python)))}
    prefixes.add(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    for prefix in list(prefixes):
        try:
            text = Path(prefix, "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                prefixes.add(os.path.dirname(os.path.abspath(value.strip())))
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        prefixes |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    out = {os.path.abspath(p) for p in prefixes} | {os.path.realpath(p) for p in prefixes}
    return sorted(p for p in out if p != "/")


def is_package_entry(name: str, package: str) -> bool:
    """Whether a ``site-packages`` entry belongs to an install of ``package`` (an import or
    distribution name, any case, ``-`` or ``_``): the package folder or module, its
    ``.dist-info``/``.egg-info``/``.egg-link``, an editable install's ``.pth`` and finder."""
    lowered = name.lower()
    for wanted in {package.lower().replace("-", "_"), package.lower().replace("_", "-")}:
        if lowered == wanted or lowered.startswith((wanted + "-", wanted + ".")):
            return True
        for prefix in ("__editable___", "__editable__.", "_"):
            rest = lowered.removeprefix(prefix)
            if rest != lowered and (rest == wanted or rest.startswith((wanted + "-", wanted + ".", wanted + "_"))):
                return True
    return False


def is_arlkit_entry(name: str) -> bool:
    """Whether a ``site-packages`` entry belongs to an arlkit install (:func:`is_package_entry`)."""
    return is_package_entry(name, "arlkit")


def _covered(path: str) -> bool:
    return any(_under(path, d) for d in SYSTEM_DIRS)


def _bind_or_link(path: str) -> Op | None:
    """A bind of ``path`` onto itself, or the same symlink when it is a relative link that stays
    next to it (``lib64 -> lib``, ``/bin -> usr/bin``); other links are bound as what they point at."""
    if os.path.islink(path):
        target = os.readlink(path)
        if not os.path.isabs(target) and ".." not in Path(target).parts:
            return ("symlink", target, path)
    if os.path.exists(path):
        return ("bind", os.path.realpath(path), path)
    return None


def _site_dirs(root: str) -> list[str]:
    if os.path.basename(root).startswith("lib"):
        patterns = [os.path.join(root, "python*", "*-packages")]
    else:
        patterns = [os.path.join(root, g) for g in _SITE_GLOBS]
    return sorted({d for p in patterns for d in glob.glob(p) if os.path.isdir(d)})


_CACHE: dict[tuple[tuple[str, ...], ...], tuple[tuple[tuple[str, int], ...], tuple[Op, ...]]] = {}
_CACHE_LOCK = threading.Lock()


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def system_view(
    pythons: tuple[str, ...], hide_paths: tuple[str, ...], hide_packages: tuple[str, ...] = ()
) -> tuple[Op, ...]:
    """The host part of the view for programs run by ``pythons``: system folders, allowed ``/etc``
    entries, the interpreters' prefixes, and masks over installs of arlkit and of
    ``hide_packages`` in every ``site-packages`` folder among them, and over ``hide_paths`` inside
    them. Cached; recomputed when a ``site-packages`` folder changes."""
    key = (pythons, hide_paths, hide_packages)
    packages = ("arlkit", *hide_packages)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None and all(_mtime(d) == m for d, m in cached[0]):
            return cached[1]
    ops: list[Op] = []
    for path in SYSTEM_DIRS + ETC_ALLOWED + tuple(p for g in ETC_GLOBS for p in sorted(glob.glob(g))):
        op = _bind_or_link(path)
        if op is not None:
            ops.append(op)
    hides = [os.path.abspath(h) for h in hide_paths if os.path.isdir(h)]
    for prefix in sorted({p for python in pythons for p in interpreter_prefixes(python)}):
        # A prefix under /usr is already there, unless a hidden folder masks it.
        if _covered(prefix) and not any(_under(prefix, h) for h in hides):
            continue
        for part in PREFIX_PARTS:
            op = _bind_or_link(os.path.join(prefix, part))
            if op is not None:
                ops.append(op)
    roots = [op[2] for op in ops if op[0] == "bind" and os.path.isdir(op[2])]
    sites = sorted({s for r in roots if not r.startswith("/etc") for s in _site_dirs(r)})
    masks: dict[str, str] = {}
    for site in sites:
        try:
            names = os.listdir(site)
        except OSError:
            continue  # unreadable here means unreadable to the sandbox user too
        for name in names:
            if any(is_package_entry(name, package) for package in packages):
                entry = os.path.join(site, name)
                masks[entry] = "dir" if os.path.isdir(entry) and not os.path.islink(entry) else "file"
    bind_targets = {op[2] for op in ops if op[0] == "bind"}
    for hide in hides:
        # Visible only when it lies inside a bound folder; binds below it (an interpreter inside
        # a hidden folder) are deeper and so applied after the mask.
        if any(_under(hide, r) and hide != r for r in roots):
            masks[hide] = "dir"
    ops += [("mask", path, kind) for path, kind in sorted(masks.items()) if path not in bind_targets]
    result = tuple(ops)
    with _CACHE_LOCK:
        _CACHE[key] = (tuple((s, _mtime(s)) for s in sites), result)
    return result


@functools.lru_cache(maxsize=64)
def _ordered(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    return tuple(_order(list(ops)))


def order_ops(ops: list[Op]) -> list[Op]:
    """``ops`` in the order to apply them, with the ``dir`` steps that create missing mount points.

    Kinds: ``tmpfs``/``dev``/``proc`` (a file system mounted at ``op[1]``), ``symlink``
    (``op[2] -> op[1]``), ``bind`` (``op[1]`` mounted read-only at ``op[2]``), ``mask`` (an empty
    read-only folder, or file, over ``op[1]``), ``dir`` (a folder created in the view). A mount
    lands on top of the ones above it, so steps go by depth. Cached (the same view repeats).
    """
    return list(_ordered(tuple(ops)))


def _order(ops: list[Op]) -> list[Op]:
    def where(op: Op) -> str:
        return str(op[2] if op[0] in ("bind", "symlink") else op[1])

    mounts = {where(op): op[0] for op in ops if op[0] != "symlink"}
    links = [where(op) for op in ops if op[0] == "symlink"]
    safe = [op for op in ops if not any(_under(where(op), link) and where(op) != link for link in links)]

    def exists(path: str) -> bool:
        """Whether ``path`` is already there once the mounts above it are applied."""
        if path == "/" or path in mounts:
            return True
        owner = max((m for m in mounts if _under(path, m)), key=len, default=None)
        return owner is not None and mounts[owner] == "bind"

    dirs: set[str] = set()
    for op in safe:
        for ancestor in list(Path(where(op)).parents)[:-1]:
            if not exists(str(ancestor)):
                dirs.add(str(ancestor))
    full = safe + [("dir", d) for d in sorted(dirs)]
    return sorted(full, key=lambda op: (len(Path(where(op)).parts), _KIND_ORDER[op[0]], where(op)))


def etc_files(folder: str, uid: int, gid: int) -> tuple[list[Op], str]:
    """The synthetic ``/etc`` files for a program running as ``uid``/``gid`` (the sandbox user
    only, no host content), kept in ``folder/etc-<uid>-<gid>``: the binds that put them in place,
    and the empty file that masks use. Written once (atomically) and reused by later runs."""
    where = os.path.join(folder, f"etc-{uid}-{gid}")
    files = {
        "passwd": (
            "root:x:0:0:sandbox root:/:/usr/sbin/nologin\n"
            f"sandbox:x:{uid}:{gid}:sandbox user:/tmp/work:/bin/sh\n"
            "nobody:x:65534:65534:sandbox nobody:/:/usr/sbin/nologin\n"
        ),
        "group": f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
        "empty": "",
    }
    if not os.path.exists(os.path.join(where, "complete")):
        os.makedirs(where, mode=0o755, exist_ok=True)
        os.chmod(where, 0o755)
        for name, text in [*files.items(), ("complete", "")]:
            partial = os.path.join(where, f".{name}.{os.getpid()}.{threading.get_ident()}")
            with open(partial, "w", encoding="ascii") as fh:
                fh.write(text)
            os.chmod(partial, 0o644)
            os.replace(partial, os.path.join(where, name))
    binds: list[Op] = [("bind", os.path.join(where, name), f"/etc/{name}") for name in files if name != "empty"]
    return binds, os.path.join(where, "empty")
