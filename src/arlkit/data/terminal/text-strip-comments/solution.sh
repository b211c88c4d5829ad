# one command per line, each one turn; then submit
grep -v -E '^[[:space:]]*(#|$)' config.ini > clean.ini
