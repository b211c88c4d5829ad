set -e
[ "$(./calc)" = 42 ]
