# one command per line, each one turn; then submit
cat chapters/ch*.txt > book.txt
