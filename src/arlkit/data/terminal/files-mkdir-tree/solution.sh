# one command per line, each one turn; then submit
mkdir -p project/src project/tests project/docs
touch project/README.md
