set -e
[ "$(sh test.sh)" = PASS ]
. ./calc.sh
[ "$(add 10 -3)" = 7 ]
[ "$(mul 3 3)" = 9 ]
