set -e
[ "$(python3 stats.py 1 2 3 4)" = 2.5 ]
[ "$(python3 stats.py 10)" = 10.0 ]
[ "$(python3 stats.py 1 2)" = 1.5 ]
