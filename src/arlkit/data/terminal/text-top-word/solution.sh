# one command per line, each one turn; then submit
sort words.txt | uniq -c | sort -rn | head -n 1 | awk '{print $2}' > top.txt
