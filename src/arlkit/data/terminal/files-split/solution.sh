# one command per line, each one turn; then submit
split -l 25 big.txt part_
