set -e
[ "$(ls dups | tr '\n' ' ')" = 'a1 a2 b2 ' ]
[ "$(cat dups/b2)" = three ]
