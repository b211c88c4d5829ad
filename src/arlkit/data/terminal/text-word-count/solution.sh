# one command per line, each one turn; then submit
wc -w < essay.txt > wc.txt
