# one command per line, each one turn; then submit
(cat jan.csv; tail -n +2 feb.csv) > all.csv
