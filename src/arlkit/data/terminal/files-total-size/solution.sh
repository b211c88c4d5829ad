# one command per line, each one turn; then submit
cat blobs/* | wc -c > total.txt
