"""The adversarial suite, part two: probes that look for answers, host data and unbounded memory.

Each case is a probe that once got through: another checkout's task data read from outside the
task folder, an installed copy of arlkit read through ``site-packages``, host ``/etc`` files and
the host's mount table in observations, a memfd bomb of several GiB that ran ``ok``, user
namespaces created inside, the host's whole ``/dev``. Every test runs at every isolation level that
works here and is skipped, with the reason, where a level cannot contain it (``none`` has no mount
namespace). The invariants of ``test_sandbox_adversarial.py`` hold for every run (no leak, within
the wall clock, the parent's secret never in the output).
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import arlkit
from arlkit.sandbox import Sandbox, seccomp
from arlkit.sandbox.isolation import seccomp_filter

from .conftest import SECRET, RunContained, needs_namespace

HAS_SECCOMP = bool(seccomp_filter())


def needs_seccomp() -> None:
    if not HAS_SECCOMP:
        pytest.skip(f"no seccomp table for this machine ({os.uname().machine}); see arlkit.sandbox.seccomp")


def _plant(base: Path) -> Path:
    """A fake checkout under ``base`` whose task data holds the secret, readable by anyone."""
    data = base / "arlkit" / "src" / "arlkit" / "data" / "code"
    data.mkdir(parents=True)
    path = data / "problems.json"
    path.write_text('{"answer": "%s"}' % SECRET)
    for entry in [base, *base.rglob("*")]:
        entry.chmod(0o755 if entry.is_dir() else 0o644)
    return path


@pytest.fixture()
def planted(tmp_path: Path) -> Iterator[list[Path]]:
    """Copies of the task data outside the task folder: beside this checkout, in the home folder,
    in /opt and /srv (wherever this user may write), and the running checkout's own data."""
    tag = f".arlkit-probe-{os.getpid()}"
    checkout = Path(arlkit.__file__).resolve().parents[2]
    bases = [checkout.parent / tag, Path.home() / tag, Path("/opt") / tag, Path("/srv") / tag]
    made: list[Path] = []
    paths: list[Path] = []
    try:
        for base in bases:
            if base.parent.is_dir() and os.access(base.parent, os.W_OK) and not base.exists():
                base.mkdir()
                made.append(base)
                paths.append(_plant(base))
        assert made, f"could not plant a copy in any of {bases}"
        own = Path(arlkit.__file__).resolve().parent / "data" / "code" / "problems.json"
        yield paths + ([own] if own.is_file() else [])
    finally:
        for base in made:
            shutil.rmtree(base, ignore_errors=True)


def _reader(paths: list[Path]) -> str:
    listed = sorted({str(p.parents[i]) for p in paths for i in range(len(p.parents) - 1)})
    return (
        "import os\n"
        f"for path in {[str(p) for p in paths]!r}:\n"
        "    try:\n"
        "        print('READ', path, open(path).read())\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.errno)\n"
        f"for folder in {listed!r}:\n"
        "    try:\n"
        "        print('LISTED', folder, os.listdir(folder))\n"
        "    except OSError:\n"
        "        pass\n"
    )


def test_another_checkouts_task_data_is_unreadable(level: str, run_contained: RunContained, planted: list[Path]) -> None:
    needs_namespace(level, "without a mount namespace the program reads whatever the caller can")
    result = run_contained(level, _reader(planted))
    assert result.outcome == "ok", result.stderr[-2000:]
    assert "READ" not in result.stdout and result.stdout.count("refused") == len(planted)
    assert not any(".arlkit-probe-" in line for line in result.stdout.splitlines() if line.startswith("LISTED"))


def _fake_venv(root: Path, editable_src: Path) -> Path:
    """A venv (the layout ``python -m venv`` makes) whose site-packages holds an installed arlkit
    with the secret in its data, an editable install's files pointing at ``editable_src``, and an
    unrelated package that must stay importable."""
    base = Path(os.path.realpath(sys.executable))
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(base)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n")
    site = root / "lib" / f"python{version}" / "site-packages"
    (site / "arlkit" / "data" / "code").mkdir(parents=True)
    (site / "arlkit" / "__init__.py").write_text(f"ANSWERS = {SECRET!r}\n")
    (site / "arlkit" / "data" / "code" / "problems.json").write_text(SECRET)
    (site / "arlkit-9.9.dist-info").mkdir()
    (site / "arlkit-9.9.dist-info" / "RECORD").write_text(SECRET)
    (site / "__editable__.arlkit-9.9.pth").write_text(f"{editable_src}\n")
    (site / "__editable___arlkit_9_9_finder.py").write_text(f"MAPPING = {{'arlkit': {str(editable_src)!r}}}  # {SECRET}\n")
    (site / "otherpkg").mkdir()
    (site / "otherpkg" / "__init__.py").write_text("VALUE = 'other package works'\n")
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return root / "bin" / "python"


def test_an_installed_copy_of_arlkit_is_masked(level: str, run_contained: RunContained, planted: list[Path], tmp_path: Path) -> None:
    needs_namespace(level, "masking a folder needs a mount namespace")
    os.chmod(tmp_path, 0o755)
    editable_src = planted[0].parents[3]  # <checkout>/src, the folder an editable install adds to sys.path
    python = _fake_venv(tmp_path / "venv", editable_src)
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    source = (
        "import os, sys\n"
        "import otherpkg\n"
        "print(otherpkg.VALUE, sys.prefix)\n"
        "try:\n"
        "    import arlkit\n"
        "    print('imported', getattr(arlkit, 'ANSWERS', None), list(getattr(arlkit, '__path__', [])))\n"
        "except ImportError as exc:\n"
        "    print('no arlkit', exc)\n"
        f"for top, dirs, files in os.walk({str(site)!r}):\n"
        "    for name in files:\n"
        "        try:\n"
        "            print(os.path.join(top, name), open(os.path.join(top, name)).read()[:200])\n"
        "        except OSError as exc:\n"
        "            print('refused', name, exc.errno)\n"
        f"print(os.path.exists({str(editable_src)!r}))\n"
    )
    result = run_contained(level, source, python=str(python))
    assert result.outcome == "ok", result.stderr[-2000:]
    assert "other package works" in result.stdout and str(tmp_path / "venv") in result.stdout
    assert result.stdout.rstrip().endswith("False")  # the editable install's source folder is not there


def test_hidden_packages_are_masked_and_other_packages_stay(level: str, run_contained: RunContained, planted: list[Path], tmp_path: Path) -> None:
    needs_namespace(level, "masking a folder needs a mount namespace")
    os.chmod(tmp_path, 0o755)
    python = _fake_venv(tmp_path / "venv", planted[0].parents[3])
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    (site / "task_gen" / "data").mkdir(parents=True)  # a task generator: its code, data, module and metadata
    (site / "task_gen" / "__init__.py").write_text(f"ANSWERS = {SECRET!r}\n")
    (site / "task_gen" / "data" / "pool.json").write_text(SECRET)
    (site / "task_gen_seeds.py").write_text(f"SEED = {SECRET!r}\n")
    (site / "task_gen-1.0.dist-info").mkdir()
    (site / "task_gen-1.0.dist-info" / "RECORD").write_text(SECRET)
    for path in site.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    source = (
        "import importlib, os\n"
        "import otherpkg\n"
        "print(otherpkg.VALUE)\n"
        "for name in ('task_gen', 'task_gen_seeds'):\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        "        print(name, getattr(module, 'ANSWERS', None), getattr(module, 'SEED', None))\n"
        "    except ImportError:\n"
        "        print('no', name)\n"
        f"for top, dirs, files in os.walk({str(site)!r}):\n"
        "    for name in files:\n"
        "        try:\n"
        "            print(os.path.join(top, name), open(os.path.join(top, name)).read()[:200])\n"
        "        except OSError as exc:\n"
        "            print('refused', name, exc.errno)\n"
    )
    result = run_contained(level, source, python=str(python), hide_packages=("task-gen", "task_gen_seeds"))
    assert result.outcome == "ok" and "other package works" in result.stdout, result.stderr[-2000:]
    assert "task_gen None None" in result.stdout and "task_gen_seeds None None" in result.stdout  # empty masks


def test_host_config_and_mount_table_do_not_reach_the_program(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "without a mount namespace the program sees the host's /etc and mount table")
    source = (
        "import os\n"
        "print('ETC', sorted(os.listdir('/etc')))\n"
        "print('ROOT', sorted(os.listdir('/')))\n"
        "for line in open('/etc/passwd'):\n"
        "    print('PASSWD', line.rstrip())\n"
        "for name in ('/proc/mounts', '/proc/self/mountinfo'):\n"
        "    for line in open(name):\n"
        "        print('MOUNT', line.split()[1 if name == '/proc/mounts' else 4])\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok", result.stderr[-2000:]
    lines = result.stdout.splitlines()
    etc = ast.literal_eval(next(line for line in lines if line.startswith("ETC"))[4:])
    allowed = {"passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "localtime", "alternatives"}
    assert {e for e in etc if not e.startswith("python3")} <= allowed
    host_passwd = set(Path("/etc/passwd").read_text().splitlines())
    assert not host_passwd & {line[7:] for line in lines if line.startswith("PASSWD")}
    top = set(ast.literal_eval(next(line for line in lines if line.startswith("ROOT"))[5:]))
    assert not top & {"home", "opt", "srv", "mnt", "boot", "sys", "run", "media", "lost+found"} - _interpreter_tops()
    inside = {line[6:] for line in lines if line.startswith("MOUNT")}
    host = {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
    # Mount points the sandbox makes itself (a container host may have some of them too).
    shared = {"/", "/proc", "/dev", "/dev/shm", "/dev/pts", "/tmp", "/var/tmp", "/dev/mqueue", "/usr"}
    shared |= {f"/etc/{name}" for name in allowed} | {f"/dev/{name}" for name in ("null", "zero", "full", "random", "urandom", "tty")}
    assert not (inside & host) - shared, f"host mounts visible inside: {sorted((inside & host) - shared)}"


def _interpreter_tops() -> set[str]:
    from arlkit.sandbox.fsview import interpreter_prefixes

    return {Path(p).parts[1] for p in interpreter_prefixes(sys.executable) if len(Path(p).parts) > 1}


def test_dev_is_minimal(level: str, run_contained: RunContained) -> None:
    needs_namespace(level, "without a mount namespace the program sees the host's /dev")
    source = (
        "import os\n"
        "print(sorted(os.listdir('/dev')))\n"
        "open('/dev/null', 'w').write('x')\n"
        "assert len(open('/dev/urandom', 'rb').read(16)) == 16 and open('/dev/zero', 'rb').read(4) == bytes(4)\n"
        "open('/dev/shm/x', 'w').write('shared')\n"
        "print(os.readlink('/dev/fd'))\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok", result.stderr[-2000:]
    listed = set(ast.literal_eval(result.stdout.splitlines()[0]))
    allowed = {"null", "zero", "full", "random", "urandom", "tty", "shm", "fd", "stdin", "stdout", "stderr"}
    assert listed - allowed <= {"pts", "ptmx", "core"}  # bubblewrap's --dev adds a private devpts
    assert {"null", "zero", "urandom", "shm", "fd"} <= listed
    assert result.stdout.splitlines()[1] == "/proc/self/fd"


def test_user_namespaces_cannot_be_created(level: str, run_contained: RunContained) -> None:
    needs_seccomp()
    clone = seccomp.syscall_number("clone")
    source = (
        "import ctypes, os, signal, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"print('unshare', libc.unshare({seccomp.CLONE_NEWUSER}), ctypes.get_errno())\n"
        f"pid = libc.syscall({clone}, {seccomp.CLONE_NEWUSER} | signal.SIGCHLD, 0, 0, 0, 0)\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
        "print('clone', pid, ctypes.get_errno())\n"
        "tool = subprocess.run(['unshare', '-U', 'true'], capture_output=True, text=True)\n"
        "print('tool', tool.returncode, tool.stderr.strip())\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok", result.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["unshare"] == "-1 1" and lines["clone"] == "-1 1"  # EPERM from the filter
    assert not lines["tool"].startswith("0 ")



def test_no_process_can_write_another_ones_memory(level: str, run_contained: RunContained) -> None:
    """A checker's program must not rewrite the checker: ``/proc/<pid>/mem`` (read-only ``/proc``),
    ``ptrace`` and ``process_vm_writev`` (the seccomp filter) are all refused against a sibling of
    the same uid, and against the program itself."""
    needs_namespace(level, "its /proc is the host's, writable")
    needs_seccomp()
    source = (
        "import ctypes, os, signal, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "for target in (pid, os.getpid()):\n"
        "    try:\n"
        "        os.close(os.open(f'/proc/{target}/mem', os.O_RDWR))\n"
        "        print('mem opened', target)\n"
        "    except OSError as exc:\n"
        "        print('mem refused', exc.errno)\n"
        "print('ptrace', libc.ptrace(16, pid, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH\n"
        "buf = ctypes.create_string_buffer(8)\n"
        "class IoVec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
        "remote = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
        "for name in ('process_vm_writev', 'process_vm_readv'):\n"
        "    n = getattr(libc, name)(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)\n"
        "    print(name, n, ctypes.get_errno())\n"
        "os.kill(pid, signal.SIGKILL)\n"
        "os.waitpid(pid, 0)\n"
    )
    result = run_contained(level, source)
    assert result.outcome == "ok", result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == ["mem refused 30", "mem refused 30"], lines  # EROFS
    assert lines[2:] == ["ptrace -1 1", "process_vm_writev -1 1", "process_vm_readv -1 1"], lines  # EPERM


MEMFD_BOMB = """
import os, sys
def fill():
    block = b'x' * (1 << 20)
    fds = []
    for i in range(60):
        fd = os.memfd_create(f'bomb{i}')
        for _ in range(15):
            os.write(fd, block)
        fds.append(fd)
    return len(fds)
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            fill()
            status = 0
        except BaseException as exc:
            print('child stopped:', type(exc).__name__, exc, file=sys.stderr)
        finally:
            os._exit(status)
    children.append(pid)
print('parent filled', fill(), 'memfds of 15 MB')
print('children', [os.waitpid(pid, 0)[1] for pid in children])
"""


def test_a_memfd_bomb_is_stopped(level: str, run_contained: RunContained, sbx) -> None:  # type: ignore[no-untyped-def]
    # Three processes x 60 memfds x 15 MB = 2.7 GB that RLIMIT_AS never sees: the seccomp filter
    # refuses memfd_create, or a memory cgroup kills the run at memory.max.
    sandbox = Sandbox(sbx.config(level))
    if not HAS_SECCOMP and sandbox.memory_guard.startswith("RLIMIT_AS"):
        pytest.skip(f"neither a seccomp table nor a delegated cgroup here: {sandbox.memory_guard}")
    result = run_contained(level, MEMFD_BOMB, wall_time_s=20.0, cpu_time_s=20)
    assert result.outcome in ("memory", "error"), (result.outcome, result.stdout, result.stderr[-1000:])
    assert "parent filled" not in result.stdout


def test_sysv_shared_memory_is_refused(level: str, run_contained: RunContained) -> None:
    needs_seccomp()
    source = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.shmget(0, 1 << 30, 0o1000 | 0o600), ctypes.get_errno())\n"  # IPC_PRIVATE, IPC_CREAT
    )
    result = run_contained(level, source)
    assert result.outcome == "ok" and result.stdout.split() == ["-1", "1"]


@pytest.mark.parametrize("folder", ["/dev/shm", "/var/tmp", "/tmp"])
def test_filling_a_scratch_tmpfs_stops_at_its_cap(level: str, run_contained: RunContained, folder: str) -> None:
    needs_namespace(level, "without a mount namespace these are the host's folders")
    source = (
        "written = 0\n"
        "block = b'x' * (1 << 20)\n"
        "try:\n"
        f"    with open({folder!r} + '/fill', 'wb', buffering=0) as fh:\n"
        "        while True:\n"
        "            written += fh.write(block)\n"
        "except OSError as exc:\n"
        "    print(written, exc.errno)\n"
    )
    result = run_contained(level, source, tmpfs_mb=8, max_file_mb=64)
    written, errno = result.stdout.split()
    cap = 8 if folder == "/tmp" else 2  # /var/tmp and /dev/shm get a quarter of tmpfs_mb
    assert result.outcome == "ok" and errno == "28" and int(written) <= cap * 1024 * 1024
