set -e
if grep -q 'http://' links.txt; then exit 1; fi
[ "$(grep -o 'https://' links.txt | wc -l)" -eq 4 ]
