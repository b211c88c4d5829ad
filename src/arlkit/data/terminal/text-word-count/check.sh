set -e
[ "$(tr -d ' \n' < wc.txt)" = 137 ]
