set -e
[ "$(sha256sum < out/data/values.txt)" = "5333fd289c3a35d05e9c06e3fe8f55ba3299f303e104a600553d86d907d14ecc  -" ]
