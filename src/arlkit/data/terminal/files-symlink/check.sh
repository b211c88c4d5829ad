set -e
test -L current
[ "$(readlink current)" = releases/v2 ]
[ "$(cat current/app)" = v2 ]
