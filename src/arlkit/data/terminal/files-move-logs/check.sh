set -e
for f in a b c; do [ "$(cat logs/$f.log)" = $f ]; done
[ -z "$(find data -name '*.log')" ]
[ "$(cat data/keep.txt)" = keep ]
