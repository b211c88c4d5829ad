# one command per line, each one turn; then submit
sed -n '10,20p' poem.txt > excerpt.txt
