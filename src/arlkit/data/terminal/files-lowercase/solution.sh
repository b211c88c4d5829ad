# one command per line, each one turn; then submit
cd upper && for f in *; do mv "$f" "$(echo "$f" | tr A-Z a-z)"; done
