# one command per line, each one turn; then submit
find repo -name '*.py' | wc -l > count.txt
