# one command per line, each one turn; then submit
awk 'length($0) > max {max = length($0); line = $0} END {print line}' quotes.txt > longest.txt
