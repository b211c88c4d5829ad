# one command per line, each one turn; then submit
cut -d' ' -f1 access.log | sort -u > ips.txt
