set -e
[ -z "$(find work -name '*~' -o -name '*.tmp')" ]
test -f work/a.txt
test -f work/sub/b.c
