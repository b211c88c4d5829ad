# one command per line, each one turn; then submit
find tree -type f -empty -delete
