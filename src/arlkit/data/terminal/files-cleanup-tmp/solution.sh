# one command per line, each one turn; then submit
find work \( -name '*~' -o -name '*.tmp' \) -delete
