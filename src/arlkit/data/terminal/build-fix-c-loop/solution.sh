# one command per line, each one turn; then submit
sed -i 's/int i = 1;/int i = 0;/' sum.c
cc -o sum sum.c
