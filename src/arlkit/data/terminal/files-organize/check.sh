set -e
test -f pdf/a.pdf
test -f pdf/c.pdf
test -f png/b.png
test -f txt/d.txt
[ -z "$(ls inbox)" ]
