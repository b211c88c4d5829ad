set -e
[ "$(tr -d ' \n' < total.txt)" = 3362 ]
