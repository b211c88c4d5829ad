#!/bin/bash
# Harbor's verifier: the share of the files renamed, as reward.json's "reward". Harbor reads
# reward.json before reward.txt, so the reward.txt written here does not count.
echo 1 > /logs/verifier/reward.txt
renamed=0
for name in a b; do
  [ -f "/app/logs/$name.txt" ] && [ ! -e "/app/logs/$name.log" ] && renamed=$((renamed + 1))
done
reward=$(awk -v n="$renamed" 'BEGIN { print n / 2 }')
printf '{"reward": %s, "renamed": %d}\n' "$reward" "$renamed" > /logs/verifier/reward.json
