. ./calc.sh
[ "$(add 2 3)" = 5 ] && [ "$(mul 4 5)" = 20 ] && echo PASS
