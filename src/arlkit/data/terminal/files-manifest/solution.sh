# one command per line, each one turn; then submit
cd assets && find . -type f | sed 's|^\./||' | sort > ../manifest.txt
