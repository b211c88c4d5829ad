# one command per line, each one turn; then submit
cd notes && for f in *.txt; do mv "$f" "${f%.txt}.md"; done
