set -e
[ "$(./prog)" = ready ]
if grep -q gcc-99 Makefile; then exit 1; fi
rm -f prog
make -s
[ "$(./prog)" = ready ]
