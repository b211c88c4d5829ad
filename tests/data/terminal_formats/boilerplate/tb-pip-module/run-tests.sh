#!/bin/bash
set -e
python3 -m venv .test-venv
source .test-venv/bin/activate
pip install --no-cache-dir pytest==8.4.1
python -m pytest $TEST_DIR/test_outputs.py -v -rA
