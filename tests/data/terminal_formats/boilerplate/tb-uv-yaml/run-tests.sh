#!/bin/bash

# Fetch curl, then uv; pytest and PyYAML go into a project of their own.
apt-get update
apt-get install -y curl

curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env

if [ "$PWD" = "/" ]; then
    echo "Set a WORKDIR first."
    exit 1
fi

uv init
uv add pytest==8.4.1 PyYAML==6.0.2

uv run pytest $TEST_DIR/test_outputs.py -rA
