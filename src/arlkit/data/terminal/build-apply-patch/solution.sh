# one command per line, each one turn; then submit
patch -p1 < fix.patch
