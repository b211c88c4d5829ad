# one command per line, each one turn; then submit
grep -oE '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]+' mail.txt | sort -u > emails.txt
