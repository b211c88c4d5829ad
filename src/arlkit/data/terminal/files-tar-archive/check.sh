set -e
d=$(mktemp -d)
tar xzf archive.tar.gz -C "$d"
diff -r site "$d/site"
