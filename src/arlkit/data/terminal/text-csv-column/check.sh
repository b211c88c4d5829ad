set -e
[ "$(wc -l < emails.txt)" -eq 8 ]
[ "$(head -n 1 emails.txt)" = user1@example.org ]
[ "$(tail -n 1 emails.txt)" = user8@example.org ]
