set -e
[ "$(cat longest.txt)" = 'Simplicity is prerequisite for reliability.' ]
