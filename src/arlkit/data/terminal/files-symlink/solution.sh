# one command per line, each one turn; then submit
ln -s releases/v2 current
