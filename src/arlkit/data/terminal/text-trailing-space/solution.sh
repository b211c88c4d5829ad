# one command per line, each one turn; then submit
sed -i 's/[ \t]*$//' messy.py
