set -e
[ "$(tr -d ' \n' < total.txt)" = 2799 ]
