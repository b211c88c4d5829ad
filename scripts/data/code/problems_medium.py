"""Medium problems: a standard technique (hashing, stacks, two pointers, simulation, small DP)."""

from __future__ import annotations

import random
import string

from spec import P, ints, rand_list

PROBLEMS: list[P] = []


def add(p: P) -> None:
    PROBLEMS.append(p)


def _two_sum_case(rng: random.Random, i: int) -> list[object]:
    nums = rand_list(rng, rng.randint(2, 40), -20, 20)
    target = rng.choice([nums[0] + nums[-1], rng.randint(-40, 40)])
    return [nums, target]


add(P(
    id="two-sum", title="Two sum", difficulty="medium", fn="two_sum",
    statement="""Write a function two_sum(nums, target) that returns the pair of indices [i, j] with i < j and
nums[i] + nums[j] == target. If several pairs qualify, return the one with the smallest i, and among
those the smallest j. Return [] when there is none. len(nums) <= 10^4.""",
    reference="""
from bisect import bisect_right

def two_sum(nums, target):
    positions = {}
    for j, x in enumerate(nums):
        positions.setdefault(x, []).append(j)
    for i, x in enumerate(nums):
        pos = positions.get(target - x)
        if pos:
            k = bisect_right(pos, i)
            if k < len(pos):
                return [i, pos[k]]
    return []
""",
    public=[[[2, 7, 11, 15], 9], [[3, 3, 4], 7]],
    hidden=[[[1, 2], 4], [[0, 0, 0], 0], [[5, -5, 5, -5], 0], [[1], 2], [list(range(10000)), 19997]],
    gen=_two_sum_case,
    n_random=8,
    brute="def two_sum(nums, target):\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n            if nums[i] + nums[j] == target:\n                return [i, j]\n    return []\n",
    brute_limit=400,
))

add(P(
    id="balanced-brackets", title="Balanced brackets", difficulty="medium",
    statement="""The first line holds t (1 <= t <= 100). Each of the next t lines holds a string of the characters
()[]{} (possibly empty, at most 10^4 characters). For each string print YES if its brackets are
balanced and properly nested, and NO otherwise.""",
    reference="""
import sys
lines = sys.stdin.read().split("\\n")
t = int(lines[0])
pairs = {")": "(", "]": "[", "}": "{"}
for k in range(1, t + 1):
    s = lines[k].strip() if k < len(lines) else ""
    stack = []
    ok = True
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pairs[ch]:
            ok = False
            break
    print("YES" if ok and not stack else "NO")
""",
    public=["3\n([]{})\n([)]\n((\n", "2\n\n}\n"],
    hidden=["1\n" + "(" * 5000 + ")" * 5000 + "\n", "2\n{[()()]}\n)(\n", "1\n" + "([{" * 100 + "}])" * 100 + "\n"],
    gen=lambda rng, i: "3\n" + "".join("".join(rng.choice("()[]{}") for _ in range(rng.randint(0, 10))) + "\n" for _ in range(3)),
    n_random=5,
))

add(P(
    id="group-anagrams", title="Group anagrams", difficulty="medium", fn="group_anagrams",
    statement="""Write a function group_anagrams(words) that groups the words that are anagrams of each other
(the same letters in any order). Return a list of groups; each group is sorted alphabetically, and
the groups are sorted by their first word. Duplicate words stay in their group as many times as
they occur.""",
    reference="""
def group_anagrams(words):
    groups = {}
    for w in words:
        groups.setdefault("".join(sorted(w)), []).append(w)
    return sorted(sorted(g) for g in groups.values())
""",
    public=[[["eat", "tea", "tan", "ate", "nat", "bat"]], [[]]],
    hidden=[[["a"]], [["ab", "ba", "ab"]], [["abc", "def", "fed", "cab", ""]]],
    gen=lambda rng, i: [["".join(rng.choice("abc") for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 15))]],
))

add(P(
    id="longest-unique-substring", title="Longest substring without repeats", difficulty="medium",
    fn="longest_unique",
    statement="""Write a function longest_unique(s) that returns the length of the longest substring of s
(contiguous characters) in which no character repeats. len(s) <= 10^5.""",
    reference="""
def longest_unique(s):
    last = {}
    start = best = 0
    for i, ch in enumerate(s):
        if ch in last and last[ch] >= start:
            start = last[ch] + 1
        last[ch] = i
        best = max(best, i - start + 1)
    return best
""",
    public=[["abcabcbb"], ["bbbbb"]],
    hidden=[[""], ["pwwkew"], ["abba"], ["dvdf"], [string.ascii_lowercase * 1000]],
    gen=lambda rng, i: ["".join(rng.choice("abcdef") for _ in range(rng.randint(0, 40)))],
    brute="def longest_unique(s):\n    best = 0\n    for i in range(len(s)):\n        for j in range(i, len(s) + 1):\n            if len(set(s[i:j])) == j - i:\n                best = max(best, j - i)\n    return best\n",
    brute_limit=200,
))

add(P(
    id="merge-intervals", title="Merge intervals", difficulty="medium",
    statement="""The first line holds n (1 <= n <= 10^4); each of the next n lines holds two integers l r (l <= r), a
closed interval. Merge every group of intervals that overlap or touch at an endpoint (for example
[1, 3] and [3, 5]) and print the merged intervals in increasing order, one "l r" per line.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n = data[0]
intervals = sorted(zip(data[1::2][:n], data[2::2][:n]))
merged = []
for l, r in intervals:
    if merged and l <= merged[-1][1]:
        merged[-1][1] = max(merged[-1][1], r)
    else:
        merged.append([l, r])
print("\\n".join(f"{l} {r}" for l, r in merged))
""",
    public=["4\n1 3\n2 6\n8 10\n15 18\n", "2\n1 4\n4 5\n"],
    hidden=["1\n5 5\n", "3\n1 10\n2 3\n4 5\n", "3\n5 6\n1 2\n3 4\n"],
    gen=lambda rng, i: (lambda ps: f"{len(ps)}\n" + "".join(f"{a} {a + b}\n" for a, b in ps))([(rng.randint(0, 50), rng.randint(0, 5)) for _ in range(rng.randint(1, 15))]),
    brute="import sys\nd = list(map(int, sys.stdin.read().split()))\nn = d[0]\ncov = set()\niv = [(d[1 + 2 * k], d[2 + 2 * k]) for k in range(n)]\nout = []\nfor l, r in sorted(iv):\n    if out and l <= out[-1][1]:\n        out[-1] = (out[-1][0], max(out[-1][1], r))\n    else:\n        out.append((l, r))\nfor l, r in out:\n    print(l, r)\n",
))

add(P(
    id="rotate-matrix", title="Rotate a matrix", difficulty="medium", fn="rotate",
    statement="""Write a function rotate(matrix) that returns the matrix (a list of rows, r x c, r, c >= 1) rotated
90 degrees clockwise, as a new list of rows (c x r).""",
    reference="""
def rotate(matrix):
    rows, cols = len(matrix), len(matrix[0])
    return [[matrix[rows - 1 - i][j] for i in range(rows)] for j in range(cols)]
""",
    public=[[[[1, 2], [3, 4]]], [[[1, 2, 3]]]],
    hidden=[[[[5]]], [[[1], [2], [3]]], [[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]],
    gen=lambda rng, i: [(lambda r, c: [rand_list(rng, c, 0, 9) for _ in range(r)])(rng.randint(1, 5), rng.randint(1, 5))],
    brute="def rotate(matrix):\n    return [list(row) for row in zip(*matrix[::-1])]\n",
))

add(P(
    id="run-length", title="Run-length encoding", difficulty="medium", fn="rle",
    statement="""Write a function rle(s) that returns the run-length encoding of s: each maximal run of one repeated
character becomes the character followed by the length of the run, e.g. "aaabcc" becomes "a3b1c2".
The empty string encodes to the empty string.""",
    reference="""
def rle(s):
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return "".join(out)
""",
    public=[["aaabcc"], [""]],
    hidden=[["a"], ["abc"], ["zzzzzzzzzzzz"], ["aabbaa"]],
    gen=lambda rng, i: ["".join(rng.choice("ab") * rng.randint(1, 4) for _ in range(rng.randint(0, 10)))],
    brute="import itertools\ndef rle(s):\n    return ''.join(f'{k}{len(list(g))}' for k, g in itertools.groupby(s))\n",
))

add(P(
    id="kth-smallest", title="k-th smallest", difficulty="medium",
    statement="""The first line holds n and k (1 <= k <= n <= 10^5); the second n integers. Print the k-th smallest
of them (counting duplicates: with values 1 1 2, the 2nd smallest is 1).""",
    reference="""
n, k = map(int, input().split())
values = sorted(map(int, input().split()))
print(values[k - 1])
""",
    public=["5 2\n7 3 9 1 3\n", "3 3\n1 1 2\n"],
    hidden=["1 1\n-5\n", "4 1\n4 3 2 1\n", "4 4\n4 3 2 1\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)} {rng.randint(1, len(v))}\n{ints(v)}\n")(rand_list(rng, rng.randint(1, 50), -100, 100)),
))

add(P(
    id="count-primes", title="Count the primes", difficulty="medium",
    statement="""The first line holds t (1 <= t <= 10); each of the next t lines an integer n (0 <= n <= 10^6). For
each n print how many prime numbers are <= n.""",
    reference="""
import sys
queries = list(map(int, sys.stdin.read().split()))[1:]
limit = max(queries + [2])
sieve = bytearray([1]) * (limit + 1)
sieve[0] = sieve[1] = 0
for p in range(2, int(limit ** 0.5) + 1):
    if sieve[p]:
        sieve[p * p :: p] = bytearray(len(range(p * p, limit + 1, p)))
prefix = [0] * (limit + 1)
count = 0
for i in range(limit + 1):
    count += sieve[i]
    prefix[i] = count
print("\\n".join(str(prefix[n]) for n in queries))
""",
    public=["2\n10\n2\n", "1\n1\n"],
    hidden=["3\n0\n1\n3\n", "1\n1000000\n", "2\n97\n100\n"],
    gen=lambda rng, i: f"3\n{rng.randint(0, 1000)}\n{rng.randint(0, 10**5)}\n{rng.randint(0, 50)}\n",
    n_random=3,
    brute="import sys\nq = list(map(int, sys.stdin.read().split()))[1:]\ndef isp(x):\n    return x > 1 and all(x % d for d in range(2, int(x ** 0.5) + 1))\nfor n in q:\n    print(sum(isp(x) for x in range(n + 1)))\n",
    brute_limit=20,
))

add(P(
    id="roman-to-int", title="Roman numerals to integers", difficulty="medium", fn="roman_to_int",
    statement="""Write a function roman_to_int(s) that converts a valid Roman numeral (I, V, X, L, C, D, M with the
usual subtractive forms IV, IX, XL, XC, CD, CM) between 1 and 3999 to an integer.""",
    reference="""
def roman_to_int(s):
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = values[ch]
        if i + 1 < len(s) and values[s[i + 1]] > v:
            total -= v
        else:
            total += v
    return total
""",
    public=[["MCMXCIV"], ["LVIII"]],
    hidden=[["I"], ["IV"], ["IX"], ["MMMCMXCIX"], ["XLII"], ["CDXLIV"]],
    gen=lambda rng, i: [_to_roman(rng.randint(1, 3999))],
))


def _to_roman(n: int) -> str:
    table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
             (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]  # fmt: skip
    out = ""
    for value, sym in table:
        while n >= value:
            out, n = out + sym, n - value
    return out


add(P(
    id="int-to-roman", title="Integers to Roman numerals", difficulty="medium", fn="int_to_roman",
    statement="""Write a function int_to_roman(n) that returns the Roman numeral of 1 <= n <= 3999, using the
subtractive forms IV, IX, XL, XC, CD and CM (so 4 is IV, not IIII).""",
    reference="""
def int_to_roman(n):
    table = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
             (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = []
    for value, symbol in table:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)
""",
    public=[[1994], [58]],
    hidden=[[1], [4], [3999], [444], [90]],
    gen=lambda rng, i: [rng.randint(1, 3999)],
))

add(P(
    id="spiral-order", title="Spiral order", difficulty="medium", fn="spiral",
    statement="""Write a function spiral(matrix) that returns the elements of the r x c matrix (a list of rows,
r, c >= 1) in clockwise spiral order, starting at the top-left corner and going right first.""",
    reference="""
def spiral(matrix):
    top, bottom, left, right = 0, len(matrix) - 1, 0, len(matrix[0]) - 1
    out = []
    while top <= bottom and left <= right:
        for j in range(left, right + 1):
            out.append(matrix[top][j])
        for i in range(top + 1, bottom + 1):
            out.append(matrix[i][right])
        if top < bottom:
            for j in range(right - 1, left - 1, -1):
                out.append(matrix[bottom][j])
        if left < right:
            for i in range(bottom - 1, top, -1):
                out.append(matrix[i][left])
        top, bottom, left, right = top + 1, bottom - 1, left + 1, right - 1
    return out
""",
    public=[[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], [[[1, 2, 3, 4]]]],
    hidden=[[[[1]]], [[[1], [2], [3]]], [[[1, 2], [3, 4], [5, 6]]], [[[1, 2, 3], [4, 5, 6]]]],
    gen=lambda rng, i: [(lambda r, c: [rand_list(rng, c, 0, 99) for _ in range(r)])(rng.randint(1, 6), rng.randint(1, 6))],
    brute="def spiral(m):\n    m = [list(r) for r in m]\n    out = []\n    while m:\n        out += m.pop(0)\n        m = [list(r) for r in zip(*m)][::-1]\n    return out\n",
))

add(P(
    id="top-words", title="Most frequent words", difficulty="medium",
    statement="""The first line holds k (k >= 1). The rest of the input is text. Words are maximal runs of the letters
a-z and A-Z, compared without regard to case. Print the k most frequent words in lower case, one
"word count" per line, the most frequent first; ties are broken alphabetically. Print fewer lines if
the text has fewer than k distinct words.""",
    reference="""
import re
import sys
lines = sys.stdin.read().split("\\n", 1)
k = int(lines[0])
text = lines[1] if len(lines) > 1 else ""
counts = {}
for w in re.findall(r"[A-Za-z]+", text):
    w = w.lower()
    counts[w] = counts.get(w, 0) + 1
for w, c in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]:
    print(w, c)
""",
    public=["2\nthe cat and the hat and THE bat\n", "3\nHello, hello!\n"],
    hidden=["1\n\n", "5\na b c d e f g\n", "2\nit's it is IT\n"],
    gen=lambda rng, i: f"{rng.randint(1, 5)}\n" + " ".join(rng.choice(["ab", "Ab", "cd", "x", "yy", "x!", "z-z"]) for _ in range(rng.randint(0, 30))) + "\n",
))

add(P(
    id="search-insert", title="Search insert position", difficulty="medium", fn="search_insert",
    statement="""Write a function search_insert(nums, target) where nums is sorted in non-decreasing order
(len(nums) <= 10^5). Return the smallest index i such that inserting target at i keeps nums sorted,
i.e. the number of elements strictly smaller than target.""",
    reference="""
def search_insert(nums, target):
    lo, hi = 0, len(nums)
    while lo < hi:
        mid = (lo + hi) // 2
        if nums[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo
""",
    public=[[[1, 3, 5, 6], 5], [[1, 3, 5, 6], 7]],
    hidden=[[[], 3], [[1, 1, 1], 1], [[1, 3], 0], [[1, 3], 2], [list(range(0, 40000, 2)), 19999]],
    gen=lambda rng, i: [sorted(rand_list(rng, rng.randint(0, 20), 0, 30)), rng.randint(-1, 31)],
    n_random=8,
    brute="def search_insert(nums, target):\n    return len([x for x in nums if x < target])\n",
))

add(P(
    id="max-subarray", title="Maximum subarray sum", difficulty="medium",
    statement="""The first line holds n (1 <= n <= 2 * 10^5), the second n integers. Print the largest sum of a
non-empty contiguous subarray.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n, values = data[0], data[1:]
best = current = values[0]
for x in values[1:]:
    current = max(x, current + x)
    best = max(best, current)
print(best)
""",
    public=["9\n-2 1 -3 4 -1 2 1 -5 4\n", "3\n-3 -1 -2\n"],
    hidden=["1\n5\n", "5\n1 2 3 4 5\n", "20000\n" + ints([(k * 7919) % 201 - 100 for k in range(20000)]) + "\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)}\n{ints(v)}\n")(rand_list(rng, rng.randint(1, 30), -20, 20)),
    brute="n = int(input())\nv = list(map(int, input().split()))\nprint(max(sum(v[i:j]) for i in range(n) for j in range(i + 1, n + 1)))\n",
    brute_limit=300,
))

add(P(
    id="pascal-row", title="Row of Pascal's triangle", difficulty="medium", fn="pascal_row",
    statement="""Write a function pascal_row(n) that returns row n (0-based) of Pascal's triangle as a list of
integers: row 0 is [1], row 3 is [1, 3, 3, 1]. 0 <= n <= 200.""",
    reference="""
def pascal_row(n):
    row = [1]
    for k in range(n):
        row.append(row[-1] * (n - k) // (k + 1))
    return row
""",
    public=[[3], [0]],
    hidden=[[1], [2], [30], [200]],
    gen=lambda rng, i: [rng.randint(0, 60)],
    n_random=3,
    brute="import math\ndef pascal_row(n):\n    return [math.comb(n, k) for k in range(n + 1)]\n",
))

add(P(
    id="caesar-cipher", title="Caesar cipher", difficulty="medium",
    statement="""The first line holds an integer k (-10^9 <= k <= 10^9), the second a line of text. Shift every ASCII
letter k places forward in the alphabet (wrapping around, keeping its case; a negative k shifts
backwards) and leave every other character unchanged. Print the result.""",
    reference="""
k = int(input())
text = input()
out = []
for ch in text:
    if "a" <= ch <= "z":
        out.append(chr((ord(ch) - 97 + k) % 26 + 97))
    elif "A" <= ch <= "Z":
        out.append(chr((ord(ch) - 65 + k) % 26 + 65))
    else:
        out.append(ch)
print("".join(out))
""",
    public=["3\nHello, World!\n", "-1\nabc XYZ\n"],
    hidden=["26\nUnchanged\n", "1000000001\nzZ\n", "0\n1234 !?\n", "-27\nAa\n"],
    gen=lambda rng, i: f"{rng.randint(-100, 100)}\n" + "".join(rng.choice(string.ascii_letters + " ,.19") for _ in range(rng.randint(0, 30))) + "\n",
))

add(P(
    id="grid-paths", title="Paths through a grid", difficulty="medium", fn="count_paths",
    statement="""Write a function count_paths(grid) where grid is a list of equal-length strings of '.' (free) and
'#' (blocked), at most 15 x 15. Count the paths from the top-left to the bottom-right cell that move
only right or down through free cells. Return 0 if either corner is blocked.""",
    reference="""
def count_paths(grid):
    rows, cols = len(grid), len(grid[0])
    ways = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            if grid[i][j] == "#":
                continue
            if i == 0 and j == 0:
                ways[i][j] = 1
                continue
            ways[i][j] = (ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)
    return ways[-1][-1]
""",
    public=[[["...", ".#.", "..."]], [["#."]]],
    hidden=[[["."]], [["..", ".#"]], [["." * 15] * 15], [[".#", ".."]]],
    gen=lambda rng, i: [(lambda r, c: ["".join("#" if rng.random() < 0.2 else "." for _ in range(c)) for _ in range(r)])(rng.randint(1, 5), rng.randint(1, 6))],
    brute="def count_paths(g):\n    r, c = len(g), len(g[0])\n    def go(i, j):\n        if i >= r or j >= c or g[i][j] == '#':\n            return 0\n        if (i, j) == (r - 1, c - 1):\n            return 1\n        return go(i + 1, j) + go(i, j + 1)\n    return go(0, 0)\n",
    brute_limit=120,
))

add(P(
    id="stock-profit", title="Best time to buy and sell", difficulty="medium", fn="max_profit",
    statement="""Write a function max_profit(prices) that returns the largest profit prices[j] - prices[i] with i < j,
or 0 if no transaction makes a profit (or there are fewer than two prices). len(prices) <= 10^5.""",
    reference="""
def max_profit(prices):
    best, lowest = 0, None
    for p in prices:
        if lowest is not None and p - lowest > best:
            best = p - lowest
        if lowest is None or p < lowest:
            lowest = p
    return best
""",
    public=[[[7, 1, 5, 3, 6, 4]], [[7, 6, 4, 3, 1]]],
    hidden=[[[]], [[5]], [[1, 2]], [[2, 4, 1, 7]], [[(k * 37) % 1000 for k in range(20000)]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(0, 30), 1, 50)],
    brute="def max_profit(p):\n    return max([p[j] - p[i] for i in range(len(p)) for j in range(i + 1, len(p))] + [0])\n",
    brute_limit=400,
))

add(P(
    id="decode-string", title="Decode a repeated string", difficulty="medium", fn="decode",
    statement="""Write a function decode(s) that expands an encoded string: k[text] stands for text repeated k times
(k is a positive integer, possibly with several digits), encodings can be nested, and letters outside
brackets stand for themselves. For example "3[a2[c]]" decodes to "accaccacc". The input is always
well formed and the result has at most 10^5 characters.""",
    reference="""
def decode(s):
    stack = [["", 1]]
    number = 0
    for ch in s:
        if ch.isdigit():
            number = number * 10 + int(ch)
        elif ch == "[":
            stack.append(["", number])
            number = 0
        elif ch == "]":
            text, times = stack.pop()
            stack[-1][0] += text * times
        else:
            stack[-1][0] += ch
    return stack[0][0]
""",
    public=[["3[a]2[bc]"], ["3[a2[c]]"]],
    hidden=[[""], ["abc"], ["2[abc]3[cd]ef"], ["10[x]"], ["1[1[1[z]]]"], ["2[a2[b2[c]]]d"]],
    gen=lambda rng, i: [_random_encoding(rng, 3)],
))


def _random_encoding(rng: random.Random, depth: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        if depth and rng.random() < 0.5:
            parts.append(f"{rng.randint(1, 4)}[{_random_encoding(rng, depth - 1)}]")
        else:
            parts.append("".join(rng.choice("xyz") for _ in range(rng.randint(1, 2))))
    return "".join(parts)


add(P(
    id="coin-change", title="Fewest coins", difficulty="medium",
    statement="""The first line holds the amount A (0 <= A <= 10^4) and the number of coin kinds m (1 <= m <= 20);
the second line m distinct positive coin values. With unlimited coins of each kind, print the
fewest coins that add up to exactly A, or -1 if A cannot be made.""",
    reference="""
amount, m = map(int, input().split())
coins = list(map(int, input().split()))
INF = float("inf")
best = [0] + [INF] * amount
for a in range(1, amount + 1):
    for c in coins:
        if c <= a and best[a - c] + 1 < best[a]:
            best[a] = best[a - c] + 1
print(best[amount] if best[amount] != INF else -1)
""",
    public=["11 3\n1 2 5\n", "3 1\n2\n"],
    hidden=["0 1\n7\n", "10000 3\n7 13 29\n", "6 3\n1 3 4\n", "7 2\n2 4\n"],
    gen=lambda rng, i: (lambda cs: f"{rng.randint(0, 60)} {len(cs)}\n{ints(cs)}\n")(rng.sample(range(1, 25), rng.randint(1, 4))),
    n_random=8,
))

add(P(
    id="next-permutation", title="Next permutation", difficulty="medium", fn="next_permutation",
    statement="""Write a function next_permutation(nums) that returns the next permutation of the list nums in
lexicographic order. If nums is the last permutation (non-increasing), return the first one (sorted
in non-decreasing order). nums may contain duplicates.""",
    reference="""
def next_permutation(nums):
    a = list(nums)
    i = len(a) - 2
    while i >= 0 and a[i] >= a[i + 1]:
        i -= 1
    if i >= 0:
        j = len(a) - 1
        while a[j] <= a[i]:
            j -= 1
        a[i], a[j] = a[j], a[i]
    a[i + 1 :] = reversed(a[i + 1 :])
    return a
""",
    public=[[[1, 2, 3]], [[3, 2, 1]]],
    hidden=[[[1]], [[]], [[1, 1, 5]], [[1, 3, 2]], [[2, 2, 0, 4, 3, 1]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(1, 6), 0, 3)],
    brute="import itertools\ndef next_permutation(nums):\n    perms = sorted(set(itertools.permutations(nums)))\n    k = perms.index(tuple(nums))\n    return list(perms[(k + 1) % len(perms)])\n",
))

add(P(
    id="collatz-steps", title="Collatz steps", difficulty="medium", fn="collatz_steps",
    statement="""Write a function collatz_steps(n) that returns how many steps the Collatz process takes to reach 1
from the positive integer n: a step replaces an even n with n / 2 and an odd n with 3n + 1. From 1
it takes 0 steps.""",
    reference="""
def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
""",
    public=[[6], [1]],
    hidden=[[2], [27], [97], [837799]],
    gen=lambda rng, i: [rng.randint(1, 10**6)],
))
