# one command per line, each one turn; then submit
tac stack.txt > reversed.txt
