# one command per line, each one turn; then submit
tar czf archive.tar.gz site
