set -e
test -x scripts/build.sh
test -x scripts/deploy.sh
[ "$(stat -c %a secret.txt)" = 600 ]
