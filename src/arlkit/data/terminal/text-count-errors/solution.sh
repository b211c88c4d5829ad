# one command per line, each one turn; then submit
grep -c ERROR app.log > errors.txt
