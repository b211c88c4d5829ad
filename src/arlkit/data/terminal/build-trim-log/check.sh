set -e
[ "$(wc -l < server.log)" -eq 100 ]
[ "$(head -n 1 server.log)" = 'event 151' ]
[ "$(tail -n 1 server.log)" = 'event 250' ]
