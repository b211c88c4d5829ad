set -e
[ "$(wc -l < excerpt.txt)" -eq 11 ]
[ "$(head -c 9 excerpt.txt)" = 'verse 10:' ]
[ "$(tail -n 1 excerpt.txt | cut -c1-9)" = 'verse 20:' ]
