awk '{ s += $1 } END { print s }' nums.txt > total.txt
