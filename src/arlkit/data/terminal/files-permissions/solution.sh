# one command per line, each one turn; then submit
chmod +x scripts/*.sh
chmod 600 secret.txt
