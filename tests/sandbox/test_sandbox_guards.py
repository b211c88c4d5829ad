"""The parts behind the view, the memory bound and the seccomp filter, tested on their own.

The cgroup path needs a machine that delegates a cgroup v2 with the memory controller; the tests
that need the kernel's cgroup run only there (skipped elsewhere with the reason), the rest use a
fake cgroup tree made of plain files.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest

from arlkit.sandbox import Sandbox, SandboxConfig, seccomp
from arlkit.sandbox.cgroup import RunCgroup, cgroup2_mounted, check_parent, own_cgroup
from arlkit.sandbox.fsview import is_arlkit_entry, is_package_entry, order_ops

V1_HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def _fake_tree(tmp_path: Path, controllers: str, own: str = "/svc/arlkit") -> tuple[Path, Path, Path]:
    root = tmp_path / "cgroup"
    folder = root / own.strip("/")
    folder.mkdir(parents=True)
    (folder / "cgroup.subtree_control").write_text(controllers + "\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"30 25 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    proc_cgroup = tmp_path / "cgroup.txt"
    proc_cgroup.write_text(f"0::{own}\n")
    return root, mountinfo, proc_cgroup


def test_cgroup2_detection_reads_the_mount_table_and_own_cgroup() -> None:
    assert not cgroup2_mounted("/sys/fs/cgroup", V1_HYBRID)
    assert cgroup2_mounted("/sys/fs/cgroup/unified", V1_HYBRID)
    assert cgroup2_mounted("/sys/fs/cgroup", "29 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert own_cgroup("12:memory:/x\n0::/user.slice/run\n") == "/user.slice/run"
    assert own_cgroup("4:memory:/x\n") is None


def test_a_delegated_parent_is_found_and_an_undelegated_one_explained(tmp_path: Path) -> None:
    root, mountinfo, proc_cgroup = _fake_tree(tmp_path, "cpu memory pids")
    folder, why = check_parent("auto", str(root), str(mountinfo), str(proc_cgroup))
    assert folder == str(root / "svc" / "arlkit") and "cgroup v2" in why
    (root / "svc" / "arlkit" / "cgroup.subtree_control").write_text("cpu pids\n")
    folder, why = check_parent("auto", str(root), str(mountinfo), str(proc_cgroup))
    assert folder is None and "not delegated" in why
    assert check_parent("off", str(root), str(mountinfo), str(proc_cgroup)) == (None, "cgroup_parent is 'off'")
    folder, why = check_parent("/elsewhere", str(root), str(mountinfo), str(proc_cgroup))
    assert folder is None and "not under" in why
    mountinfo.write_text(V1_HYBRID)
    assert "not a cgroup2 mount" in check_parent("auto", str(root), str(mountinfo), str(proc_cgroup))[1]


def test_a_run_cgroup_gets_its_limits_joins_through_the_shell_and_reads_oom_kills(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    stale = parent / "arlkit-999999999-3"  # no such pid: a run of a process that died mid-run
    stale.mkdir()
    cgroup = RunCgroup(str(parent), 256 * 1024 * 1024, 36)
    run = Path(cgroup.path)
    assert not stale.exists(), "a dead process's cgroup was not swept"
    assert (run / "memory.max").read_text() == str(256 * 1024 * 1024)
    # The join prefix writes "0" (the shell itself) to cgroup.procs, then runs the command.
    done = subprocess.run([*cgroup.join_prefix(), "/bin/echo", "inside"], capture_output=True, text=True, check=True)
    assert done.stdout == "inside\n" and (run / "cgroup.procs").read_text().strip() == "0"
    assert not cgroup.oom_killed()
    (run / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert cgroup.oom_killed()


def test_the_live_memory_bound_is_reported_and_holds(sbx) -> None:  # type: ignore[no-untyped-def]
    level = sbx.working_levels[-1]
    sandbox = Sandbox(sbx.config(level, memory_mb=200, wall_time_s=30.0, cpu_time_s=30))
    assert sandbox.memory_guard.startswith(("cgroup:", "fallback:", "RLIMIT_AS"))
    if not sandbox.memory_guard.startswith("cgroup:"):
        pytest.skip(f"no delegated cgroup v2 on this machine: {sandbox.memory_guard}")
    # Four processes of 120 MB each stay under RLIMIT_AS (200 MB) but not under memory.max.
    source = (
        "import os, signal\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        break\n"
        "block = bytearray(120 * 1024 * 1024)\n"
        "for i in range(0, len(block), 4096):\n"
        "    block[i] = 1\n"
        "signal.pause()  # held until memory.max kills it (or the 30 s wall clock, which fails the test)\n"
    )
    result = sandbox.run_python(source)
    assert result.outcome == "memory", result


def test_seccomp_filters_are_whole_instructions_for_each_table() -> None:
    for machine in seccomp.SUPPORTED_MACHINES:
        program = seccomp.build_filter(machine)
        assert len(program) % 8 == 0 and 10 < len(program) // 8 < 64
        # The program starts by loading the audit architecture (offset 4 of seccomp_data).
        assert struct.unpack("=HBBI", program[:8]) == (0x20, 0, 0, 4)
    with pytest.raises(ValueError, match="supported"):
        seccomp.build_filter("sparc64")
    assert seccomp.syscall_number("memfd_create", "x86_64") == 319


def test_installed_arlkit_entries_are_recognised() -> None:
    for name in ("arlkit", "arlkit-0.1.0.dist-info", "__editable__.arlkit-0.1.0.pth", "__editable___arlkit_0_1_0_finder.py",
                 "arlkit.egg-link", "ARLKIT-1.0.egg-info", "_arlkit.pth"):  # fmt: skip
        assert is_arlkit_entry(name), name
    for name in ("numpy", "arlkitten", "my_arlkit", "__editable__.numpy-1.0.pth"):
        assert not is_arlkit_entry(name), name


def test_entries_of_hidden_packages_are_recognised_by_import_or_distribution_name() -> None:
    for package in ("reasoning-gym", "reasoning_gym", "Reasoning_Gym"):
        for name in ("reasoning_gym", "reasoning_gym-0.1.25.dist-info", "reasoning-gym.egg-link",
                     "__editable___reasoning_gym_0_1_finder.py", "__editable__.reasoning_gym-0.1.pth"):  # fmt: skip
            assert is_package_entry(name, package), (name, package)
        for name in ("reasoning", "reasoning_gym_extras", "gym", "my_reasoning_gym"):
            assert not is_package_entry(name, package), (name, package)
    assert is_package_entry("_yaml", "_yaml") and is_package_entry("_yaml", "yaml") and is_package_entry("yaml", "yaml")
    assert is_package_entry("pycosat.cpython-311-x86_64-linux-gnu.so", "pycosat") and not is_package_entry("sixty", "six")


def test_view_steps_create_mount_points_before_mounting_into_them() -> None:
    ops = order_ops(
        [
            ("mask", "/opt/py/lib/site/arlkit", "dir"),
            ("bind", "/opt/py/lib", "/opt/py/lib"),
            ("tmpfs", "/tmp", 1 << 20, 0o1777, 16),
            ("bind", "/tmp/x/in", "/tmp/x/in"),
            ("symlink", "usr/bin", "/bin"),
            ("bind", "/somewhere", "/bin/inside"),  # under a symlink: dropped, never followed
        ]
    )
    where = [op[2] if op[0] in ("bind", "symlink") else op[1] for op in ops]
    assert "/bin/inside" not in where
    assert where.index("/opt") < where.index("/opt/py") < where.index("/opt/py/lib") < where.index("/opt/py/lib/site/arlkit")
    assert where.index("/tmp") < where.index("/tmp/x") < where.index("/tmp/x/in")
    assert "/opt/py/lib/site" not in where  # inside a bind: already there
    assert [op[0] for op in ops if op[1] in ("/opt", "/tmp/x")] == ["dir", "dir"]


def test_bad_cgroup_parent_values_are_refused() -> None:
    with pytest.raises(ValueError, match="cgroup_parent"):
        SandboxConfig(cgroup_parent="relative/folder")
    if os.path.isdir("/sys/fs/cgroup"):
        from arlkit.sandbox import SandboxUnavailable

        with pytest.raises(SandboxUnavailable, match="cgroup_parent"):
            Sandbox(SandboxConfig(cgroup_parent="/sys/fs/cgroup/arlkit-no-such-folder", min_isolation="none"))
