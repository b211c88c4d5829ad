# one command per line, each one turn; then submit
join -t, <(sort names.csv) <(sort scores.csv) > joined.csv
