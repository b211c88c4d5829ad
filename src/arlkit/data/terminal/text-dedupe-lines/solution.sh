# one command per line, each one turn; then submit
awk '!seen[$0]++' list.txt > unique.txt
