set -e
[ "$(tr -d ' \n' < errors.txt)" = 12 ]
