set -e
[ "$(python3 src/greet.py)" = 'Hello, world!' ]
