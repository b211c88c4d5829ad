set -e
chmod +x countdown.sh
[ "$(timeout 5 ./countdown.sh | tr '\n' ' ')" = '5 4 3 2 1 ' ]
