set -e
[ "$(tr -d ' \n' < version.txt)" = 3.14.2 ]
