# one command per line, each one turn; then submit
tail -n +2 sales.csv | awk -F, '{s += $2} END {print s}' > total.txt
