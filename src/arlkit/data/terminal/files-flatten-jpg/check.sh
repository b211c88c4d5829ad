set -e
[ "$(ls flat | tr '\n' ' ')" = 'a.jpg b.jpg c.jpg ' ]
test -f photos/2023/trip/b.jpg
