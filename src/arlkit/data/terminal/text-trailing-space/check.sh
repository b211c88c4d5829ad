set -e
printf 'def f(x):\n    return x\n\nprint(f(1))\n' | cmp - messy.py
