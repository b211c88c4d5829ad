set -e
[ "$(./sum)" = 15 ]
cc -o /tmp/s sum.c
[ "$(/tmp/s)" = 15 ]
