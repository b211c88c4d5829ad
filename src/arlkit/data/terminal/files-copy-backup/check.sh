set -e
test -d config.bak
diff -r config config.bak
