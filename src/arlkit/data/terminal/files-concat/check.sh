set -e
[ "$(wc -l < book.txt)" -eq 12 ]
[ "$(head -n 1 book.txt)" = 'Chapter 1' ]
[ "$(tail -n 1 book.txt)" = 'Chapter 12' ]
[ "$(sed -n 10p book.txt)" = 'Chapter 10' ]
