# one command per line, each one turn; then submit
cd dups && md5sum * | sort -k1,1 -k2,2 | awk 'seen[$1]++ {print $2}' | xargs -r rm
