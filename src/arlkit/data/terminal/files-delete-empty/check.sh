set -e
[ -z "$(find tree -type f -empty)" ]
[ "$(cat tree/full1)" = x ]
[ "$(cat tree/sub/full2)" = y ]
