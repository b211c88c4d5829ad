import sys

nums = [float(a) for a in sys.argv[1:]]
print(sum(nums) / (len(nums) + 1))
