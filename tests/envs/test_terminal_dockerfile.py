"""A Terminal-Bench or Harbor task loads only when its Dockerfile's image holds nothing the sandbox lacks
(docs/environments.md#terminal, "What the image holds"): a plain base image with harmless RUN lines and
installs of what this machine has loads, with /app as the Dockerfile makes it; a base image of the
task's own, an install of what is not here, a download or build, or a file made in /app is refused
with a one-line reason, grouped as "need their own Docker image" in the set's report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from arlkit.envs.protocol import Task
from arlkit.envs.terminal import TerminalConfig, TerminalEnv, load_task
from arlkit.envs.terminal import here
from arlkit.envs.terminal.dockerfile import app_files, base_image, read_build
from arlkit.envs.terminal.tasks import TaskRefused, load_task_set
from arlkit.sandbox import available_levels

IMAGES = Path(__file__).resolve().parents[1] / "data" / "terminal_formats" / "images"
REFUSED = {
    "harbor-own-image": "needs its own Docker image (FROM registry.example.com/acme/solver-env:2.1)",
    "harbor-pip-missing": "needs its own Docker image (its environment/Dockerfile installs what is not here: "
                          "arlkit-absent-frobnicate (pip))",  # pytest and the reporting plugin are arlkit's to give
    "tb-apt-missing": "needs its own Docker image (its Dockerfile installs what is not here: arlkit-absent-frobc (apt))",
    "tb-downloads": "needs its own Docker image (its Dockerfile runs: curl)",
    "tb-writes-app": "needs its own Docker image (its Dockerfile makes files in /app that arlkit cannot make: "
                     "printf > /app/server.conf)",
}
has_git_and_make = pytest.mark.skipif(
    any(shutil.which(tool, path=here.SYSTEM_PATH) is None for tool in ("git", "make")),
    reason="tb-apt-present installs git and make, which this machine must have for it to load",
)
needs_sandbox = pytest.mark.skipif(
    all(available_levels()[lv] is not None for lv in ("unshare", "bwrap")),
    reason="the terminal environment needs a namespaced sandbox level (bwrap, or unshare as root)",
)


@has_git_and_make
def test_plain_images_load_and_the_others_are_refused_as_needing_their_own() -> None:
    tasks, report = load_task_set(IMAGES)
    assert [t.name for t in tasks] == ["tb-apt-present", "tb-plain"]
    assert {s.name: (s.kind, s.reason) for s in report.skipped} == {n: ("image", r) for n, r in REFUSED.items()}
    assert report.headline() == f"2 tasks loaded from {IMAGES}, 5 skipped (5 need their own Docker image)"
    assert report.counts() == [("image", 5)]
    # /app is what the Dockerfile makes: task-deps/ copied into the base image's WORKDIR (/app for
    # Terminal-Bench's images), the folder its RUN mkdir makes; not the folder's other files
    plain = next(t for t in tasks if t.name == "tb-plain")
    assert plain.listing() == ["out/", "words.txt"]
    assert next(t for t in tasks if t.name == "tb-apt-present").listing() == ["Makefile"]


@needs_sandbox
@has_git_and_make
@pytest.mark.parametrize("name", ["tb-apt-present", "tb-plain"])
def test_the_reference_solutions_of_the_plain_images_pass(name: str) -> None:
    env = TerminalEnv(TerminalConfig(data_dir=str(IMAGES)))
    spec = next(t for t in env.all_tasks() if t.name == name)
    env.reset(Task(spec.task_id, spec.to_payload()), 0)
    assert not env.check(env.archive).passed
    for command in spec.solution:
        assert env.step(command).valid
    final = env.step("submit")
    assert final.done and final.success, env.last_check.output[-3000:]
    env.close()


def test_base_images() -> None:
    for image in ("ubuntu:24.04", "debian:bookworm-slim", "python:3.12-slim", "docker.io/library/python:3.13",
                  "buildpack-deps:jammy", "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624",
                  "ghcr.io/laude-institute/t-bench/python-3-13:latest"):
        assert base_image(image) == (True, ""), image
    assert base_image("public.ecr.aws/docker/library/golang:1.26.2-bookworm") == (True, "go")
    assert base_image("eclipse-temurin:17.0.12_7-jdk-jammy") == (True, "java")
    assert base_image("mcr.microsoft.com/dotnet/sdk:8.0.405") == (True, "dotnet")
    for image in ("ghcr.io/laude-institute/t-bench/deveval:latest", "localstack/localstack:4.3",
                  "swebench/sweb.eval.x86_64.sympy_1776_sympy-24661:latest", "registry.example.com/acme/env:2"):
        assert base_image(image) == (False, ""), image


DOCKERFILE = """\
# syntax=docker/dockerfile:1
FROM golang:1.22 AS build
RUN go build -o /out/tool ./cmd

FROM python:3.12-slim AS base
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends git=1:2.39.2-1 make tmux \\
    && rm -rf /var/lib/apt/lists/*

FROM base
WORKDIR /app
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install -U pip \\
    && /opt/venv/bin/pip install --retries 3 -i https://pypi.example/simple "numpy>=1.26" Pillow==10.0
RUN useradd -m agent && echo 'alias ll="ls -l"' >> ~/.bashrc && mkdir -p data/raw /var/log/task \\
    && chmod 700 /var/log/task && echo 42 > /etc/answer.txt && ln -s /usr/bin/python3 /usr/local/bin/py
RUN curl -fsSL https://example.com/setup.sh | bash && make -C /opt/src install
RUN <<EOF
git clone https://example.com/repo.git /opt/repo
EOF
RUN cat > /app/config.ini <<'CFG'
[main]
FROM = not an instruction
CFG
RUN chmod +x /app/run.sh && cp /etc/hosts hosts.bak && go version
COPY --from=build /out/tool /usr/local/bin/tool
COPY data.csv /app/
COPY data.csv /protected/
ENTRYPOINT ["/usr/local/bin/start.sh"]
CMD ["bash"]
"""


def test_read_build_says_what_the_image_holds(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "data.csv").write_text("a,b\n")
    build = read_build(tmp_path)
    assert build is not None and build.base == "python:3.12-slim"  # the last stage, through the stage it names
    assert build.apt == ["git", "make", "tmux"]
    assert build.pip == ["numpy", "pillow"]  # pip itself, option values and the index left out
    assert build.runs == ["curl", "bash", "make src", "git clone"]  # RUN <<EOF: its body is the script
    assert build.app_writes == ["cat > /app/config.ini", "chmod /app/run.sh", "cp /app/hosts.bak"]
    # files given content outside /app (not the shell's own ~/.bashrc; folders, modes and links are harmless)
    assert build.elsewhere == ["/etc/answer.txt", "/usr/local/bin/tool (from the stage build)", "/protected"]
    assert build.entrypoint == "/usr/local/bin/start.sh"  # CMD is not read: the harness replaces it
    # the RUN mkdir's folders are made in /app (not /var/log/task); a heredoc's body is no instruction
    assert app_files(tmp_path) == [(None, "data"), (None, "data/raw"), (tmp_path / "data.csv", "data.csv")]
    assert read_build(tmp_path / "missing") is None


def _tb_task(folder: Path, dockerfile: str, *, compose: str = "", context: str = "") -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.yaml").write_text("instruction: Write 1 to /app/out.txt.\n")
    (folder / "solution.sh").write_text("echo 1 > /app/out.txt\n")
    (folder / "tests" / "test_outputs.py").write_text("def test_out():\n    assert open('/app/out.txt').read() == '1\\n'\n")
    (folder / context / "input.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / context / "input.txt").write_text("in\n")
    (folder / context / "Dockerfile").write_text(dockerfile)
    if compose:
        (folder / "docker-compose.yaml").write_text(compose)
    return folder


def test_the_folder_of_a_terminal_bench_task_is_what_its_dockerfile_copies(tmp_path: Path) -> None:
    # COPY . takes the folder's files, never its own (task.yaml, the solution, the tests, the Dockerfile)
    whole = load_task(_tb_task(tmp_path / "whole", "FROM ubuntu:24.04\nWORKDIR /app\nCOPY . .\n"))
    assert whole.listing() == ["input.txt"]
    # docker-compose's build context: client/ holds the Dockerfile and what it copies
    compose = "services:\n  client:\n    build:\n      context: client\n      dockerfile: Dockerfile\n"
    client = load_task(_tb_task(tmp_path / "client", "FROM ubuntu:24.04\nCOPY input.txt /app/data/in.txt\n",
                                compose=compose, context="client"))
    assert client.listing() == ["data/", "data/in.txt"]
    _tb_task(tmp_path / "client-apt", "FROM ubuntu:24.04\nRUN apt-get install -y arlkit-absent-tool\n",
             compose=compose, context="client")
    with pytest.raises(TaskRefused, match=r"\(its client/Dockerfile installs what is not here: arlkit-absent-tool"):
        load_task(tmp_path / "client-apt")


def test_what_an_image_starts_or_copies_from_elsewhere_is_refused(tmp_path: Path) -> None:
    _tb_task(tmp_path / "starts", "FROM ubuntu:24.04\nWORKDIR /app\nENTRYPOINT [\"/usr/local/bin/init.sh\"]\n")
    with pytest.raises(TaskRefused, match=r"starts a program with the container \(ENTRYPOINT /usr/local/bin/init.sh\)$") as caught:
        load_task(tmp_path / "starts")
    assert caught.value.kind == "services"
    _tb_task(tmp_path / "heredoc", "FROM ubuntu:24.04\nCOPY <<EOT /app/notes.txt\nhello\nEOT\n")
    with pytest.raises(TaskRefused, match=r"copies into /app what arlkit cannot follow\)$"):
        load_task(tmp_path / "heredoc")
    _tb_task(tmp_path / "shell", "FROM ubuntu:24.04\nWORKDIR /app\nENTRYPOINT [\"/bin/bash\", \"-l\"]\n")
    assert load_task(tmp_path / "shell").listing() == []  # a plain shell starts nothing


def test_pip_packages_must_be_importable_by_both_pythons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert here.python_lacks(["json", "arlkit_absent_module"]) == ["arlkit_absent_module"]
    _tb_task(tmp_path / "yaml", "FROM python:3.13\nRUN pip install pyyaml==6.0 pytest\nWORKDIR /app\n")
    monkeypatch.setattr(here, "_sandbox_imports", lambda modules: {m: m != "yaml" for m in modules})
    # arlkit's interpreter imports yaml, the sandbox's python3 (which the agent runs) does not
    with pytest.raises(TaskRefused, match=r"installs what is not here: pyyaml \(pip\)\)$"):
        load_task(tmp_path / "yaml")
    monkeypatch.setattr(here, "_sandbox_imports", lambda modules: dict.fromkeys(modules, True))
    assert load_task(tmp_path / "yaml").listing() == []
