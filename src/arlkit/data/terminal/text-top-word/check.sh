set -e
[ "$(tr -d ' \n' < top.txt)" = plum ]
