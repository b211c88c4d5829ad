set -e
printf '1,bob1,53\n2,fay2,90\n3,cid3,51\n4,ann4,90\n5,dee5,84\n6,dee6,93\n7,eve7,65\n' | cmp - joined.csv
