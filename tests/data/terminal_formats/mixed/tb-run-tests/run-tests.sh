#!/bin/bash
# Terminal-Bench runs this from /app with the tests in $TEST_DIR.
if [ ! -x /app/greet.sh ]; then
  echo "greet.sh is not executable"
  exit 1
fi
pytest "$TEST_DIR/test_outputs.py" -rA
