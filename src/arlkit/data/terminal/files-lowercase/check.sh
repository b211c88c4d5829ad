set -e
[ "$(ls upper | tr '\n' ' ')" = 'data.csv mixedcase.md readme.txt ' ]
[ "$(cat upper/data.csv)" = d ]
