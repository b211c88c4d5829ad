"""What the terminal sandbox has, asked of this machine: commands on the system's ``PATH``, Debian
packages, and the Python modules of the two interpreters a task meets there.

The sandbox shows the host's ``/usr`` read-only, so a command or package here is a command or
package there. Two Pythons count: arlkit's own interpreter, which runs the checks' pytest, and the
sandbox's ``python3`` (the host's, first on the system ``PATH``; arlkit's where the host has none),
which the agent's commands and the reference solutions run.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from arlkit.envs.terminal.testscripts import PytestScript

__all__ = ["apt_present", "import_name", "importable", "missing_here", "plugin_modules", "python_lacks",
           "sandbox_python"]

_IMPORT_NAMES = {
    "pyyaml": "yaml", "scikit-learn": "sklearn", "scikit-image": "skimage", "beautifulsoup4": "bs4", "pillow": "PIL",
    "python-dateutil": "dateutil", "opencv-python": "cv2", "opencv-python-headless": "cv2",
    "opencv-contrib-python": "cv2", "gitpython": "git", "fasttext-wheel": "fasttext", "protobuf": "google.protobuf",
    "grpcio": "grpc", "grpcio-tools": "grpc_tools", "pycryptodome": "Crypto", "pycryptodomex": "Cryptodome",
    "python-dotenv": "dotenv", "pyjwt": "jwt", "psycopg2-binary": "psycopg2", "pyzmq": "zmq", "pymupdf": "fitz",
    "python-docx": "docx", "python-pptx": "pptx", "websocket-client": "websocket", "faiss-cpu": "faiss",
    "pysocks": "socks", "tree-sitter": "tree_sitter",
}
"""Import names that are not the pip name lowercased with ``-`` as ``_``."""
_APT_COMMANDS = {"build-essential": "gcc", "procps": "ps", "nodejs": "node", "iproute2": "ip", "netcat-openbsd": "nc",
                 "openssh-client": "ssh", "python3-pip": "pip3"}
"""Debian packages whose command is not their name."""
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_DPKG_STATUS = Path("/var/lib/dpkg/status")


def import_name(package: str) -> str:
    """The module a pip package is imported as (``scikit-learn``: ``sklearn``)."""
    name = re.sub(r"[-_.]+", "-", package).lower()
    return _IMPORT_NAMES.get(name, name.replace("-", "_"))


def importable(module: str) -> bool:
    """Whether arlkit's interpreter can import ``module``."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=1)
def sandbox_python() -> str:
    """The ``python3`` the sandbox's commands run: the host's, else arlkit's interpreter (as the
    sandbox's driver links it)."""
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        if os.path.exists(os.path.join(folder, "python3")):
            return os.path.join(folder, "python3")
    return sys.executable


_SANDBOX_MODULES: dict[str, bool] = {}
_PROBE = ("import importlib.util, json, sys\n"
          "def found(m):\n    try:\n        return importlib.util.find_spec(m) is not None\n"
          "    except (ImportError, ValueError):\n        return False\n"
          "print(json.dumps({m: found(m) for m in sys.argv[1:]}))")


def _sandbox_imports(modules: list[str]) -> dict[str, bool]:
    """Whether the sandbox's ``python3`` can import each of ``modules`` (asked once per module)."""
    python = sandbox_python()
    if python == sys.executable:
        return {m: importable(m) for m in modules}
    ask = [m for m in modules if m not in _SANDBOX_MODULES]
    if ask:
        try:
            done = subprocess.run([python, "-I", "-c", _PROBE, *ask], capture_output=True, text=True, timeout=60,
                                  check=True)
            _SANDBOX_MODULES.update({m: bool(v) for m, v in json.loads(done.stdout).items()})
        except (OSError, subprocess.SubprocessError, ValueError, AttributeError):
            _SANDBOX_MODULES.update(dict.fromkeys(ask, False))
    return {m: _SANDBOX_MODULES[m] for m in modules}


def python_lacks(modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` that arlkit's interpreter (the checks') or the sandbox's ``python3``
    (the agent's) cannot import, in order."""
    wanted = list(dict.fromkeys(modules))
    sandbox = _sandbox_imports(wanted)
    return [m for m in wanted if not (importable(m) and sandbox[m])]


@functools.lru_cache(maxsize=1)
def _dpkg_installed() -> frozenset[str]:
    """The Debian packages installed on this machine (none where there is no dpkg database)."""
    try:
        text = _DPKG_STATUS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    names = set()
    for entry in text.split("\n\n"):
        package = re.search(r"^Package: (\S+)", entry, re.M)
        if package and re.search(r"^Status: .* installed$", entry, re.M):
            names.add(package.group(1))
    return frozenset(names)


def apt_present(package: str) -> bool:
    """Whether the sandbox has what Debian's ``package`` gives: it is installed here, its command is
    on the system ``PATH``, or (``python3-X``) the sandbox's ``python3`` imports ``X``."""
    name = package.split("=")[0].split(":")[0]
    if name in _dpkg_installed() or shutil.which(_APT_COMMANDS.get(name, name), path=SYSTEM_PATH):
        return True
    if name.startswith("python3-"):
        module = import_name(name.removeprefix("python3-"))
        return _sandbox_imports([module])[module]
    return False


def plugin_modules(plugins: tuple[str, ...]) -> dict[str, str]:
    """The module pytest loads for each of ``plugins`` (pip names) installed here (its ``pytest11``
    entry point)."""
    found: dict[str, str] = {}
    for point in entry_points(group="pytest11"):
        dist = re.sub(r"[-_.]+", "-", point.dist.name).lower() if point.dist is not None else ""
        if dist in plugins and importable(point.value.split(":")[0]):
            found.setdefault(dist, point.value.split(":")[0])
    return found


def missing_here(run: PytestScript) -> list[str]:
    """What a test script installs for its tests that arlkit's interpreter cannot import (packages,
    plugins) or this machine does not have (an apt package's command), each named once."""
    missing = [p for p in run.packages if not importable(import_name(p))]
    plugins = plugin_modules(run.plugins)
    missing += [p for p in run.plugins if p not in plugins]
    for package in run.apt:
        if package.startswith("python3-"):
            ok = importable(import_name(package.removeprefix("python3-")))
        else:
            ok = shutil.which(_APT_COMMANDS.get(package, package), path=SYSTEM_PATH) is not None
        if not ok:
            missing.append(f"{package} (apt)")
    return list(dict.fromkeys(missing))
