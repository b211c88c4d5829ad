set -e
make -s
test -f app
make -s clean
test ! -e app
test ! -e main.o
test -f main.c
