set -e
[ "$(tr -d ' \n' < count.txt)" = 7 ]
