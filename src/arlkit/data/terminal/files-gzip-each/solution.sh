# one command per line, each one turn; then submit
gzip exports/*.csv
