# one command per line, each one turn; then submit
cp -r config config.bak
