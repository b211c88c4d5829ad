# one command per line, each one turn; then submit
sed -i 's/printf("Hello, world!\\n")$/&;/' hello.c
make
