set -e
printf '1000\n985\n982\n962\n829\n756\n747\n617\n573\n563\n531\n426\n420\n267\n256\n246\n235\n124\n123\n39\n35\n35\n13\n-4\n-18\n' | cmp - sorted.txt
