set -e
printf 'HELLO THERE\nQUIET PLEASE 42\n' | cmp - shout.txt
