set -e
[ "$(tr -d ' \n' < largest.txt)" = beta.bin ]
