# one command per line, each one turn; then submit
tr a-z A-Z < shout.txt > shout.tmp && mv shout.tmp shout.txt
