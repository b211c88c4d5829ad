# one command per line, each one turn; then submit
printf '\nclean:\n\trm -f *.o app\n' >> Makefile
