# one command per line, each one turn; then submit
awk '{print $9}' access.log | sort | uniq -c | awk '{print $2, $1}' > codes.txt
