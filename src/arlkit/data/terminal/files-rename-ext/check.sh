set -e
[ "$(cat notes/a.md)" = alpha ]
[ "$(cat notes/b.md)" = bravo ]
[ "$(cat notes/c.md)" = charlie ]
if ls notes/*.txt >/dev/null 2>&1; then exit 1; fi
