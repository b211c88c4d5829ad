set -e
printf '200 30\n302 11\n404 13\n500 6\n' | cmp - codes.txt
