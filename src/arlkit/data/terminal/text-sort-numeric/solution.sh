# one command per line, each one turn; then submit
sort -rn numbers.txt > sorted.txt
