# one command per line, each one turn; then submit
sed -i 's|(len(nums) + 1)|len(nums)|' stats.py
