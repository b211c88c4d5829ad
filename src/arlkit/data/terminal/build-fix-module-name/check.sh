set -e
[ "$(python3 main.py)" = 42 ]
[ "$(sha256sum < main.py)" = '224267ee7ec0086d8b4b0e29b1f4c6a1ef0b800a8985639e190fb9207c804887  -' ]
