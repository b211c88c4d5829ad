set -e
for p in aa ab ac ad; do [ "$(wc -l < part_$p)" -eq 25 ]; done
cat part_aa part_ab part_ac part_ad | cmp - big.txt
