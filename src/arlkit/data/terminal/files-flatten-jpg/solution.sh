# one command per line, each one turn; then submit
mkdir -p flat
find photos -name '*.jpg' -exec cp {} flat/ \;
