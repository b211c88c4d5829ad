#!/bin/bash
# Terminal-Bench installs pytest with uv here; arlkit runs the tests directly.
pytest $TEST_DIR/test_outputs.py -rA
