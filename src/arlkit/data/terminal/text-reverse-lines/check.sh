set -e
printf 'frame 9\nframe 8\nframe 7\nframe 6\nframe 5\nframe 4\nframe 3\nframe 2\nframe 1\nframe 0\n' | cmp - reversed.txt
