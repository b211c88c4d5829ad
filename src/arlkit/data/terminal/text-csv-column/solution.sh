# one command per line, each one turn; then submit
tail -n +2 users.csv | cut -d, -f3 > emails.txt
