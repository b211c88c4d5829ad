# one command per line, each one turn; then submit
cc -o calc main.c util.c
