# one command per line, each one turn; then submit
tr '\t' ',' < data.tsv > data.csv
