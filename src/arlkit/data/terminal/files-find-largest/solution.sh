# one command per line, each one turn; then submit
ls -S files | head -n 1 > largest.txt
