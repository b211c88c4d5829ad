set -e
[ "$(./convert.sh 100)" = 212.0 ]
[ "$(./convert.sh 0)" = 32.0 ]
[ "$(./convert.sh -40)" = -40.0 ]
[ "$(./convert.sh 37)" = 98.6 ]
