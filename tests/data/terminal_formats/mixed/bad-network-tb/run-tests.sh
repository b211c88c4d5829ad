#!/bin/bash
pip install pytest==8.4.1 requests
curl -sSf -o $TEST_DIR/expected.txt https://example.com/expected.txt
pytest $TEST_DIR/test_outputs.py -rA
