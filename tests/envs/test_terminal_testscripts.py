"""The test scripts arlkit replaces by its own pytest (envs/terminal/testscripts.py): each installer
variant of Terminal-Bench's run-tests.sh and Harbor's test.sh is recognized with what pytest runs and
what the script installs; a script that does anything else (downloads test data, builds, tests on
its own terms, reads another status) is not; what is missing here is named."""

from __future__ import annotations

import pytest

from arlkit.envs.terminal.formats import import_name, missing_here
from arlkit.envs.terminal.testscripts import PytestScript, read_test_script

# Terminal-Bench 1: curl fetched with apt-get, uv's installer piped to sh, a uv project.
TB_UV_INIT = """#!/bin/bash
# Install curl
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
if [ "$PWD" = "/" ]; then
    echo "Error: no working directory."
    exit 1
fi
uv init
uv add pytest==8.4.1
uv run pytest $TEST_DIR/test_outputs.py -rA
"""
# Terminal-Bench 1: the harness's helpers, with the packages the tests import added between them.
TB_HELPERS = """#!/bin/bash
source $TEST_DIR/setup-uv-pytest.sh
uv add pandas==2.3.0 pyarrow==20.0.0
bash $TEST_DIR/run-uv-pytest.sh
"""
# Terminal-Bench 1: a named venv and uv pip install over continuation lines.
TB_UV_VENV = """#!/bin/bash
apt-get update && apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
uv venv -p 3.11 .tbench-testing
source .tbench-testing/bin/activate
uv python pin 3.11
uv pip install \\
    pytest==8.4.1 \\
    scikit-learn==1.7.0 \\
    numpy==2.3.1
uv run pytest $TEST_DIR/test_outputs.py -rA
"""
# Terminal-Bench 1: pip only, and pip3 into the system after cd to the tests.
TB_PIP = "#!/bin/bash\npip install pytest==8.4.1 requests==2.32.4 psutil\npytest $TEST_DIR/test_outputs.py -v -rA\n"
TB_PIP_CD = """set -e
pip3 install --break-system-packages pytest==8.3.4
echo "installed"
cd $TEST_DIR
pytest test_outputs.py test_more.py -rA
"""
TB_VENV_MODULE = ("python3 -m venv .venv\nsource .venv/bin/activate\npip install pytest\n"
                  "python -m pytest ${TEST_DIR}/test_outputs.py\n")
# Harbor (Terminal-Bench 2.0): uvx with pytest and the ctrf reporter; the reward from $?.
HARBOR_UVX = """#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
if [ "$PWD" = "/" ]; then
    echo "Error: no working directory."
    exit 1
fi
uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA


if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""
# Harbor: uv run --with, the status kept in a variable, printf, a reward of 0 written first.
HARBOR_UV_RUN = """#!/bin/bash
set -u
mkdir -p /logs/verifier
REWARD_FILE="/logs/verifier/reward.txt"
printf '0' > "$REWARD_FILE"
if ! command -v uv >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq curl > /dev/null
  curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh
  export PATH="$HOME/.local/bin:$PATH"
fi
cd /app
set +e
uv run --with pytest==8.4.1 --with numpy==2.3.1 pytest /tests -rA --tb=short > /logs/verifier/test-stdout.txt 2>&1
status=$?
set -e
if [ "$status" -ne 0 ]; then printf '0' > "$REWARD_FILE"; else printf '1.0' > "$REWARD_FILE"; fi
exit 0
"""
# Harbor: pytest from the image, its output through tee, the status from PIPESTATUS.
HARBOR_TEE = """#!/bin/bash
mkdir -p /logs/verifier
set +e
python3 -m pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA 2>&1 | tee /logs/verifier/test.log
if [ ${PIPESTATUS[0]} -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.parametrize(("script", "reward", "expected"), [
    (TB_UV_INIT, False, PytestScript(("test_outputs.py",))),
    (TB_HELPERS, False, PytestScript(("test_outputs.py",), packages=("pandas", "pyarrow"))),
    (TB_UV_VENV, False, PytestScript(("test_outputs.py",), packages=("scikit-learn", "numpy"))),
    (TB_PIP, False, PytestScript(("test_outputs.py",), packages=("requests", "psutil"))),
    (TB_PIP_CD, False, PytestScript(("test_outputs.py", "test_more.py"))),
    (TB_VENV_MODULE, False, PytestScript(("test_outputs.py",), app_on_path=True)),
    (HARBOR_UVX, True, PytestScript(("test_outputs.py",), dropped=("--ctrf", "pytest-json-ctrf"))),
    (HARBOR_UV_RUN, True, PytestScript((".",), packages=("numpy",))),
    (HARBOR_TEE, True, PytestScript(("test_outputs.py",), app_on_path=True, dropped=("--ctrf",))),
])
def test_each_installer_variant_is_recognized(script: str, reward: bool, expected: PytestScript) -> None:
    assert read_test_script(script, reward=reward) == expected


def test_the_helpers_a_task_holds_are_read_in_place_of_the_harness_ones() -> None:
    own = {"setup-uv-pytest.sh": "apt-get update\napt-get install -y curl python3-pil\n"
                                 "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
                                 "source $HOME/.local/bin/env\nuv init\nuv add pytest==8.4.1\n",
           "run-uv-pytest.sh": "#! /bin/bash\n\nuv run pytest $TEST_DIR/test_main.py -rA\n"}
    assert read_test_script(TB_HELPERS, reward=False, helpers=own) == PytestScript(
        ("test_main.py",), packages=("pandas", "pyarrow"), apt=("python3-pil",))
    assert read_test_script(TB_HELPERS, reward=False, helpers={"run-uv-pytest.sh": "make check\n"}) is None


@pytest.mark.parametrize(("script", "reward"), [
    # it also downloads what the tests compare with
    (TB_UV_INIT.replace("uv init", "curl -sSfo $TEST_DIR/expected.json https://example.com/expected.json\nuv init"),
     False),
    (HARBOR_UVX.replace("uvx", "wget -q https://example.com/data.tar.gz -O /tests/data.tar.gz\nuvx", 1), True),
    (TB_PIP.replace("pytest $TEST_DIR", "gcc -o /app/prog /app/prog.c\npytest $TEST_DIR"), False),  # it builds
    (TB_UV_INIT.replace("curl -LsSf https://astral.sh", "curl -LsSf https://example.com"), False),  # not uv's installer
    (TB_PIP.replace("-v -rA", "-k fast"), False),  # a selection of the tests changes the verdict
    (TB_PIP.replace("-v -rA", "-p pytest_timeout"), False),
    (TB_PIP + "pytest $TEST_DIR/test_more.py\n", False),  # two pytest runs
    (TB_PIP.replace("$TEST_DIR/test_outputs.py", "/app/tests/test_outputs.py"), False),  # tests outside /tests
    (TB_PIP.replace("$TEST_DIR/test_outputs.py", "$TEST_DIR/test_outputs.py::test_one"), False),
    (TB_PIP.replace("pip install", "pip install -r /app/requirements.txt"), False),  # packages not named
    (TB_PIP.replace("pip install pytest", "source /app/venv/bin/activate\npip install pytest"), False),  # its venv
    (TB_PIP.replace("pytest $TEST_DIR", "export PYTHONPATH=/app/src\npytest $TEST_DIR"), False),
    (HARBOR_UVX.replace("if [ $? -eq 0 ]", "echo done\nif [ $? -eq 0 ]"), True),  # $? is echo's
    (HARBOR_UVX.replace("echo 0 >", "echo 1 >"), True),  # 1 whatever pytest says
    (HARBOR_UVX.replace("-rA\n", "-rA || true\n"), True),
    (HARBOR_TEE.replace("${PIPESTATUS[0]}", "$?"), True),  # tee's status
    (HARBOR_UVX.split("\n\n\nif")[0], True),  # no reward written
    (HARBOR_UVX, False),  # a reward from a Terminal-Bench script
    (TB_UV_INIT, True),  # no reward from a Harbor script
    ("pytest $TEST_DIR/test_outputs.py &\nwait\n", False),
    ("cat > /tests/test_extra.py << 'EOF'\ndef test_x(): pass\nEOF\npytest /tests\n", False),
    ("echo 'unclosed\n", False),
])
def test_scripts_that_do_more_are_not_recognized(script: str, reward: bool) -> None:
    assert read_test_script(script, reward=reward) is None


def test_what_is_missing_here_is_named() -> None:
    here = PytestScript(("test_outputs.py",), packages=("PyYAML", "numpy"), apt=("bash", "python3-yaml"))
    assert missing_here(here) == []
    missing = PytestScript(("test_outputs.py",), packages=("pyyaml", "arlkit-no-such-package"),
                           plugins=("pytest-arlkit-absent",), apt=("arlkit-absent-tool", "python3-yaml"))
    assert missing_here(missing) == ["arlkit-no-such-package", "pytest-arlkit-absent", "arlkit-absent-tool (apt)"]
    assert [import_name(p) for p in ("scikit-learn", "PyYAML", "beautifulsoup4", "Pillow", "python-dateutil",
                                     "typing_extensions")] == ["sklearn", "yaml", "bs4", "PIL", "dateutil",
                                                               "typing_extensions"]
