# one command per line, each one turn; then submit
sed -i 's/^CC=.*/CC=cc/' Makefile
make
