# one command per line, each one turn; then submit
awk -F, 'NR == 1 || $2 >= 30' people.csv > adults.csv
