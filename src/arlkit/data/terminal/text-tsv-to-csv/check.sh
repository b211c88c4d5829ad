set -e
printf 'name,qty,price\nnut,3,0.5\nbolt,10,0.25\n' | cmp - data.csv
