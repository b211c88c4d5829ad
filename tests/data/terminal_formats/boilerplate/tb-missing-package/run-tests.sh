#!/bin/bash
source $TEST_DIR/setup-uv-pytest.sh
uv add arlkit-no-such-package==1.0 pyyaml
bash $TEST_DIR/run-uv-pytest.sh
