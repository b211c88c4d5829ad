set -e
[ "$(./hello)" = 'Hello, world!' ]
cc -o /tmp/h hello.c
[ "$(/tmp/h)" = 'Hello, world!' ]
