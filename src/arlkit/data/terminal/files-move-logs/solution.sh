# one command per line, each one turn; then submit
mkdir -p logs
find data -name '*.log' -exec mv {} logs/ \;
