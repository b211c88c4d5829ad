set -e
[ "$(gzip -dc exports/jan.csv.gz | tail -n 1)" = 1,2 ]
[ "$(gzip -dc exports/feb.csv.gz | tail -n 1)" = 3,4 ]
if ls exports/*.csv >/dev/null 2>&1; then exit 1; fi
