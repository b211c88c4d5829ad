"""Hard problems: graphs, dynamic programming, and inputs large enough that a quadratic Python
solution runs out of time (one or two large hidden tests per problem)."""

from __future__ import annotations

import random

from spec import P, ints, rand_list

PROBLEMS: list[P] = []


def add(p: P) -> None:
    PROBLEMS.append(p)


def _array_input(values: list[int]) -> str:
    return f"{len(values)}\n{ints(values)}\n"


def _big(seed: int, n: int, lo: int, hi: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(lo, hi) for _ in range(n)]


add(P(
    id="lis-length", title="Longest increasing subsequence", difficulty="hard",
    statement="""The first line holds n (1 <= n <= 5 * 10^4), the second n integers. Print the length of the longest
strictly increasing subsequence (not necessarily contiguous).""",
    reference="""
import sys
from bisect import bisect_left
data = list(map(int, sys.stdin.read().split()))
tails = []
for x in data[1:1 + data[0]]:
    k = bisect_left(tails, x)
    if k == len(tails):
        tails.append(x)
    else:
        tails[k] = x
print(len(tails))
""",
    public=["8\n10 9 2 5 3 7 101 18\n", "4\n7 7 7 7\n"],
    hidden=["1\n5\n", "6\n1 2 3 4 5 6\n", "6\n6 5 4 3 2 1\n", _array_input(_big(1, 20000, -10**9, 10**9))],
    gen=lambda rng, i: _array_input(rand_list(rng, rng.randint(1, 40), 0, 30)),
    brute="n = int(input())\na = list(map(int, input().split()))\nbest = [1] * n\nfor i in range(n):\n    for j in range(i):\n        if a[j] < a[i]:\n            best[i] = max(best[i], best[j] + 1)\nprint(max(best))\n",
    brute_limit=1000,
))


def _maze(rng: random.Random, r: int, c: int) -> str:
    cells = [["#" if rng.random() < 0.25 else "." for _ in range(c)] for _ in range(r)]
    cells[0][0], cells[r - 1][c - 1] = "S", "E"
    return f"{r} {c}\n" + "".join("".join(row) + "\n" for row in cells)


add(P(
    id="maze-shortest-path", title="Shortest path in a maze", difficulty="hard",
    statement="""The first line holds r and c (1 <= r, c <= 300); the next r lines hold the maze: '.' free, '#' wall,
exactly one 'S' (start) and one 'E' (exit). Each move goes one cell up, down, left or right onto a
non-wall cell. Print the fewest moves from S to E, or -1 if E cannot be reached.""",
    reference="""
import sys
from collections import deque
lines = sys.stdin.read().split("\\n")
r, c = map(int, lines[0].split())
grid = lines[1:1 + r]
for i in range(r):
    j = grid[i].find("S")
    if j >= 0:
        start = (i, j)
dist = {start: 0}
queue = deque([start])
answer = -1
while queue:
    i, j = queue.popleft()
    if grid[i][j] == "E":
        answer = dist[(i, j)]
        break
    for ni, nj in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
        if 0 <= ni < r and 0 <= nj < c and grid[ni][nj] != "#" and (ni, nj) not in dist:
            dist[(ni, nj)] = dist[(i, j)] + 1
            queue.append((ni, nj))
print(answer)
""",
    public=["3 4\nS..#\n.#..\n...E\n", "2 2\nS#\n#E\n"],
    hidden=["1 2\nSE\n", "1 3\nE.S\n", "200 200\n" + "S" + "." * 199 + "\n" + ("." * 200 + "\n") * 198 + "." * 199 + "E\n"],
    gen=lambda rng, i: _maze(rng, rng.randint(2, 12), rng.randint(2, 12)),
    n_random=8,
))


def _graph(rng: random.Random) -> str:
    n = rng.randint(2, 8)
    edges = [(rng.randint(1, n), rng.randint(1, n), rng.randint(0, 20)) for _ in range(rng.randint(0, 15))]
    return f"{n} {len(edges)}\n" + "".join(f"{a} {b} {w}\n" for a, b, w in edges)


def _big_graph(seed: int, n: int, m: int) -> str:
    rng = random.Random(seed)
    edges = [(k, k + 1, rng.randint(50, 100)) for k in range(1, n)]
    edges += [(rng.randint(1, n), rng.randint(1, n), rng.randint(1, 10**6)) for _ in range(m - len(edges))]
    return f"{n} {m}\n" + "".join(f"{a} {b} {w}\n" for a, b, w in edges)


add(P(
    id="dijkstra", title="Cheapest route", difficulty="hard",
    statement="""The first line holds n and m (2 <= n <= 10^5, 0 <= m <= 2 * 10^5): n towns and m one-way roads. Each
of the next m lines holds a b w: a road from town a to town b of cost w (0 <= w <= 10^6; roads may
repeat or loop). Print the cheapest total cost from town 1 to town n, or -1 if n is unreachable.""",
    reference="""
import heapq
import sys
data = list(map(int, sys.stdin.read().split()))
n, m = data[0], data[1]
adj = [[] for _ in range(n + 1)]
for k in range(m):
    a, b, w = data[2 + 3 * k : 5 + 3 * k]
    adj[a].append((b, w))
dist = [None] * (n + 1)
heap = [(0, 1)]
while heap:
    d, u = heapq.heappop(heap)
    if dist[u] is not None:
        continue
    dist[u] = d
    for v, w in adj[u]:
        if dist[v] is None:
            heapq.heappush(heap, (d + w, v))
print(dist[n] if dist[n] is not None else -1)
""",
    public=["4 5\n1 2 1\n2 4 5\n1 3 2\n3 4 1\n1 4 10\n", "3 1\n1 2 7\n"],
    hidden=["2 0\n", "2 2\n1 2 0\n1 2 5\n", "3 3\n1 1 1\n1 2 2\n2 3 3\n", _big_graph(7, 10000, 30000)],
    gen=lambda rng, i: _graph(rng),
    n_random=10,
    brute="import sys\nd = list(map(int, sys.stdin.read().split()))\nn, m = d[0], d[1]\nINF = float('inf')\ndist = [INF] * (n + 1)\ndist[1] = 0\nfor _ in range(n):\n    for k in range(m):\n        a, b, w = d[2 + 3 * k: 5 + 3 * k]\n        if dist[a] + w < dist[b]:\n            dist[b] = dist[a] + w\nprint(dist[n] if dist[n] < INF else -1)\n",
    brute_limit=400,
))

add(P(
    id="count-islands", title="Count the islands", difficulty="hard", fn="count_islands",
    statement="""Write a function count_islands(grid) where grid is a list of equal-length strings of '1' (land) and
'0' (water), at most 300 x 300. An island is a maximal group of land cells connected horizontally or
vertically. Return the number of islands.""",
    reference="""
def count_islands(grid):
    rows, cols = len(grid), len(grid[0]) if grid else 0
    seen = [[False] * cols for _ in range(rows)]
    islands = 0
    for i in range(rows):
        for j in range(cols):
            if grid[i][j] == "1" and not seen[i][j]:
                islands += 1
                seen[i][j] = True
                stack = [(i, j)]
                while stack:
                    a, b = stack.pop()
                    for x, y in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                        if 0 <= x < rows and 0 <= y < cols and grid[x][y] == "1" and not seen[x][y]:
                            seen[x][y] = True
                            stack.append((x, y))
    return islands
""",
    public=[[["11000", "11000", "00100", "00011"]], [["0"]]],
    hidden=[[["1"]], [["101", "010", "101"]], [["1" * 200] * 200], [["10" * 100, "01" * 100] * 100]],
    gen=lambda rng, i: [(lambda r, c: ["".join(rng.choice("01") for _ in range(c)) for _ in range(r)])(rng.randint(1, 8), rng.randint(1, 8))],
))

add(P(
    id="edit-distance", title="Edit distance", difficulty="hard", fn="edit_distance",
    statement="""Write a function edit_distance(a, b) that returns the fewest single-character insertions, deletions
and substitutions that turn string a into string b. len(a), len(b) <= 1000.""",
    reference="""
def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        prev = cur
    return prev[-1]
""",
    public=[["horse", "ros"], ["intention", "execution"]],
    hidden=[["", ""], ["", "abc"], ["abc", ""], ["same", "same"], ["ab" * 250, "ba" * 250]],
    gen=lambda rng, i: ["".join(rng.choice("abc") for _ in range(rng.randint(0, 7))), "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))],
    n_random=8,
    brute="import functools\ndef edit_distance(a, b):\n    @functools.lru_cache(None)\n    def d(i, j):\n        if i == 0 or j == 0:\n            return i + j\n        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))\n    return d(len(a), len(b))\n",
    brute_limit=100,
))

add(P(
    id="lcs-length", title="Longest common subsequence", difficulty="hard",
    statement="""Read two lines, strings a and b of lower-case letters (1 <= length <= 2000 each). Print the length
of their longest common subsequence.""",
    reference="""
a = input().strip()
b = input().strip()
prev = [0] * (len(b) + 1)
for ch in a:
    cur = [0]
    for j, other in enumerate(b):
        cur.append(prev[j] + 1 if ch == other else max(prev[j + 1], cur[j]))
    prev = cur
print(prev[-1])
""",
    public=["abcde\nace\n", "abc\ndef\n"],
    hidden=["a\na\n", "abcabcabc\ncba\n", "".join(random.Random(3).choice("ab") for _ in range(800)) + "\n" + "".join(random.Random(4).choice("ab") for _ in range(800)) + "\n"],
    gen=lambda rng, i: "".join(rng.choice("abc") for _ in range(rng.randint(1, 9))) + "\n" + "".join(rng.choice("abc") for _ in range(rng.randint(1, 9))) + "\n",
    n_random=8,
    brute="import functools, sys\nsys.setrecursionlimit(10000)\na = input().strip()\nb = input().strip()\n@functools.lru_cache(None)\ndef f(i, j):\n    if i == len(a) or j == len(b):\n        return 0\n    return f(i + 1, j + 1) + 1 if a[i] == b[j] else max(f(i + 1, j), f(i, j + 1))\nprint(f(0, 0))\n",
    brute_limit=60,
))


def _knapsack(rng: random.Random, i: int) -> str:
    n, cap = rng.randint(1, 8), rng.randint(0, 30)
    items = [(rng.randint(1, 15), rng.randint(0, 40)) for _ in range(n)]
    return f"{n} {cap}\n" + "".join(f"{w} {v}\n" for w, v in items)


add(P(
    id="knapsack", title="0/1 knapsack", difficulty="hard",
    statement="""The first line holds n and W (1 <= n <= 200, 0 <= W <= 10^4); each of the next n lines holds the
weight (1 <= w <= 10^4) and value (0 <= v <= 10^6) of an item. Print the largest total value of a
set of items (each used at most once) whose total weight is at most W.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n, cap = data[0], data[1]
best = [0] * (cap + 1)
for k in range(n):
    w, v = data[2 + 2 * k], data[3 + 2 * k]
    for c in range(cap, w - 1, -1):
        if best[c - w] + v > best[c]:
            best[c] = best[c - w] + v
print(best[cap])
""",
    public=["3 4\n4 5\n1 3\n3 4\n", "2 0\n1 10\n2 20\n"],
    hidden=["1 5\n6 100\n", "3 10\n5 10\n5 10\n5 10\n", "100 4000\n" + "".join(f"{(k * 97) % 500 + 1} {(k * 7919) % 10000}\n" for k in range(100))],
    gen=_knapsack,
    n_random=8,
    brute="import sys, itertools\nd = list(map(int, sys.stdin.read().split()))\nn, cap = d[0], d[1]\nit = [(d[2 + 2 * k], d[3 + 2 * k]) for k in range(n)]\nbest = 0\nfor mask in range(1 << n):\n    w = sum(it[k][0] for k in range(n) if mask >> k & 1)\n    if w <= cap:\n        best = max(best, sum(it[k][1] for k in range(n) if mask >> k & 1))\nprint(best)\n",
    brute_limit=120,
))


def _dag(rng: random.Random, i: int) -> str:
    n = rng.randint(1, 7)
    order = list(range(1, n + 1))
    rng.shuffle(order)
    edges = set()
    for _ in range(rng.randint(0, 10)):
        a, b = sorted(rng.sample(range(n), 2)) if n > 1 else (0, 0)
        if a != b:
            edges.add((order[a], order[b]))
    if i % 3 == 2 and n > 2:
        edges.add((order[-1], order[0]))  # a cycle
    return f"{n} {len(edges)}\n" + "".join(f"{a} {b}\n" for a, b in sorted(edges))


add(P(
    id="course-order", title="Course order", difficulty="hard",
    statement="""The first line holds n and m (1 <= n <= 10^5, 0 <= m <= 2 * 10^5): courses 1..n and m prerequisite
pairs. Each of the next m lines holds a b: course a must be taken before course b. Print an order
of all n courses that respects every prerequisite, as n numbers separated by spaces; when several
orders exist print the lexicographically smallest one. Print IMPOSSIBLE if there is none.""",
    reference="""
import heapq
import sys
data = list(map(int, sys.stdin.read().split()))
n, m = data[0], data[1]
out_edges = [[] for _ in range(n + 1)]
indegree = [0] * (n + 1)
for k in range(m):
    a, b = data[2 + 2 * k], data[3 + 2 * k]
    out_edges[a].append(b)
    indegree[b] += 1
ready = [v for v in range(1, n + 1) if indegree[v] == 0]
heapq.heapify(ready)
order = []
while ready:
    v = heapq.heappop(ready)
    order.append(v)
    for w in out_edges[v]:
        indegree[w] -= 1
        if indegree[w] == 0:
            heapq.heappush(ready, w)
print(" ".join(map(str, order)) if len(order) == n else "IMPOSSIBLE")
""",
    public=["4 3\n1 2\n3 2\n2 4\n", "2 2\n1 2\n2 1\n"],
    hidden=["1 0\n", "3 0\n", "3 2\n3 1\n3 2\n", "10000 9999\n" + "".join(f"{k + 1} {k}\n" for k in range(1, 10000))],
    gen=_dag,
    n_random=9,
    brute="import sys, itertools\nd = list(map(int, sys.stdin.read().split()))\nn, m = d[0], d[1]\ne = [(d[2 + 2 * k], d[3 + 2 * k]) for k in range(m)]\nfor p in itertools.permutations(range(1, n + 1)):\n    pos = {v: i for i, v in enumerate(p)}\n    if all(pos[a] < pos[b] for a, b in e):\n        print(' '.join(map(str, p)))\n        break\nelse:\n    print('IMPOSSIBLE')\n",
    brute_limit=90,
))

add(P(
    id="count-inversions", title="Count inversions", difficulty="hard",
    statement="""The first line holds n (1 <= n <= 10^5), the second n integers a_1..a_n. Print the number of pairs
(i, j) with i < j and a_i > a_j.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
values = data[1:1 + data[0]]
ranks = {v: k + 1 for k, v in enumerate(sorted(set(values)))}
size = len(ranks)
tree = [0] * (size + 1)
inversions = 0
for seen, v in enumerate(values):
    r = ranks[v]
    le = 0
    i = r
    while i > 0:
        le += tree[i]
        i -= i & -i
    inversions += seen - le
    i = r
    while i <= size:
        tree[i] += 1
        i += i & -i
print(inversions)
""",
    public=["5\n2 4 1 3 5\n", "3\n1 1 1\n"],
    hidden=["1\n7\n", "4\n4 3 2 1\n", _array_input(_big(11, 20000, 1, 10**9))],
    gen=lambda rng, i: _array_input(rand_list(rng, rng.randint(1, 40), 0, 10)),
    brute="n = int(input())\na = list(map(int, input().split()))\nprint(sum(1 for i in range(n) for j in range(i + 1, n) if a[i] > a[j]))\n",
    brute_limit=500,
))

add(P(
    id="running-median", title="Running median", difficulty="hard",
    statement="""The first line holds n (1 <= n <= 10^5), the second n integers. After reading each number, print the
median of the numbers read so far, one per line: for an odd count the middle value, for an even
count the smaller of the two middle values.""",
    reference="""
import heapq
import sys
data = list(map(int, sys.stdin.read().split()))
low, high = [], []
out = []
for x in data[1:1 + data[0]]:
    if not low or x <= -low[0]:
        heapq.heappush(low, -x)
    else:
        heapq.heappush(high, x)
    if len(low) > len(high) + 1:
        heapq.heappush(high, -heapq.heappop(low))
    elif len(high) > len(low):
        heapq.heappush(low, -heapq.heappop(high))
    out.append(-low[0])
print("\\n".join(map(str, out)))
""",
    public=["5\n5 15 1 3 8\n", "2\n2 1\n"],
    hidden=["1\n-4\n", "4\n1 2 3 4\n", _array_input(_big(21, 20000, -10**6, 10**6))],
    gen=lambda rng, i: _array_input(rand_list(rng, rng.randint(1, 25), -20, 20)),
    brute="n = int(input())\na = list(map(int, input().split()))\nfor k in range(1, n + 1):\n    s = sorted(a[:k])\n    print(s[(k - 1) // 2])\n",
    brute_limit=400,
))


def _edges_input(rng: random.Random, n: int, m: int) -> str:
    edges = [(rng.randint(1, n), rng.randint(1, n)) for _ in range(m)]
    return f"{n} {m}\n" + "".join(f"{a} {b}\n" for a, b in edges)


add(P(
    id="connected-components", title="Connected components", difficulty="hard",
    statement="""The first line holds n and m (1 <= n <= 10^5, 0 <= m <= 2 * 10^5); each of the next m lines holds an
undirected edge a b (1 <= a, b <= n; self-loops and repeated edges may occur). Print the number of
connected components of the graph.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n, m = data[0], data[1]
parent = list(range(n + 1))
def find(x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x
components = n
for k in range(m):
    a, b = find(data[2 + 2 * k]), find(data[3 + 2 * k])
    if a != b:
        parent[a] = b
        components -= 1
print(components)
""",
    public=["5 3\n1 2\n2 3\n4 5\n", "3 0\n"],
    hidden=["1 1\n1 1\n", "4 4\n1 2\n2 1\n3 4\n4 3\n", _edges_input(random.Random(31), 20000, 20000)],
    gen=lambda rng, i: _edges_input(rng, rng.randint(1, 10), rng.randint(0, 10)),
    n_random=8,
))

add(P(
    id="sliding-window-max", title="Sliding window maximum", difficulty="hard", fn="window_max",
    statement="""Write a function window_max(nums, k) that returns the maximum of every window of k consecutive
elements of nums, from left to right (1 <= k <= len(nums) <= 10^5).""",
    reference="""
from collections import deque

def window_max(nums, k):
    window = deque()
    out = []
    for i, x in enumerate(nums):
        while window and nums[window[-1]] <= x:
            window.pop()
        window.append(i)
        if window[0] <= i - k:
            window.popleft()
        if i >= k - 1:
            out.append(nums[window[0]])
    return out
""",
    public=[[[1, 3, -1, -3, 5, 3, 6, 7], 3], [[4, 2], 1]],
    hidden=[[[9], 1], [[1, 2, 3], 3], [[5, 5, 5, 5], 2], [_big(41, 20000, -10**6, 10**6), 1000]],
    gen=lambda rng, i: (lambda v: [v, rng.randint(1, len(v))])(rand_list(rng, rng.randint(1, 20), -9, 9)),
    n_random=8,
    brute="def window_max(nums, k):\n    return [max(nums[i:i + k]) for i in range(len(nums) - k + 1)]\n",
    brute_limit=300,
))

add(P(
    id="trapping-rain-water", title="Trapping rain water", difficulty="hard", fn="trap",
    statement="""Write a function trap(heights) where heights are non-negative bar heights of width 1. Return how many
units of water the bars hold after rain. len(heights) <= 10^5.""",
    reference="""
def trap(heights):
    left, right = 0, len(heights) - 1
    left_max = right_max = water = 0
    while left < right:
        if heights[left] < heights[right]:
            left_max = max(left_max, heights[left])
            water += left_max - heights[left]
            left += 1
        else:
            right_max = max(right_max, heights[right])
            water += right_max - heights[right]
            right -= 1
    return water
""",
    public=[[[0, 1, 0, 2, 1, 0, 1, 3, 2, 1, 2, 1]], [[4, 2, 0, 3, 2, 5]]],
    hidden=[[[]], [[3]], [[1, 2, 3]], [[3, 0, 3]], [_big(51, 20000, 0, 10**4)]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(0, 20), 0, 6)],
    brute="def trap(h):\n    return sum(max(0, min(max(h[:i + 1]), max(h[i:])) - h[i]) for i in range(len(h)))\n",
    brute_limit=300,
))

add(P(
    id="word-break", title="Word break", difficulty="hard", fn="word_break",
    statement="""Write a function word_break(s, words) that returns True if the string s can be split into a
sequence of one or more words from the list words (each word may be used any number of times), and
False otherwise. len(s) <= 1000, at most 1000 words of length <= 20. The empty string can be split.""",
    reference="""
def word_break(s, words):
    vocab = set(words)
    lengths = sorted({len(w) for w in vocab})
    ok = [True] + [False] * len(s)
    for i in range(1, len(s) + 1):
        for n in lengths:
            if n > i:
                break
            if ok[i - n] and s[i - n : i] in vocab:
                ok[i] = True
                break
    return ok[-1]
""",
    public=[["leetcode", ["leet", "code"]], ["catsandog", ["cats", "dog", "sand", "and", "cat"]]],
    hidden=[["", ["a"]], ["a", []], ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", ["a", "aa", "aaa", "aaaa"]], ["a" * 1000, ["a", "aa"]], ["ab" * 500 + "c", ["ab", "abab", "c"]]],
    gen=lambda rng, i: ["".join(rng.choice(["ab", "a", "ba", "b"]) for _ in range(rng.randint(0, 6))), rng.sample(["a", "ab", "ba", "bb", "aab"], rng.randint(1, 3))],
    n_random=8,
))

add(P(
    id="n-queens", title="N queens", difficulty="hard", fn="n_queens",
    statement="""Write a function n_queens(n) that returns the number of ways to place n queens on an n x n chess
board so that no two attack each other (same row, column or diagonal). 1 <= n <= 10.""",
    reference="""
def n_queens(n):
    def place(row, cols, diag1, diag2):
        if row == n:
            return 1
        total = 0
        free = ((1 << n) - 1) & ~(cols | diag1 | diag2)
        while free:
            bit = free & -free
            free ^= bit
            total += place(row + 1, cols | bit, ((diag1 | bit) << 1) & ((1 << n) - 1), (diag2 | bit) >> 1)
        return total
    return place(0, 0, 0, 0)
""",
    public=[[4], [1]],
    hidden=[[2], [3], [6], [8], [10]],
    gen=None,
    n_random=0,
    brute="import itertools\ndef n_queens(n):\n    return sum(1 for p in itertools.permutations(range(n)) if len({p[i] + i for i in range(n)}) == n and len({p[i] - i for i in range(n)}) == n)\n",
    brute_limit=3,
))

add(P(
    id="min-path-sum", title="Minimum path sum", difficulty="hard", fn="min_path_sum",
    statement="""Write a function min_path_sum(grid) where grid is a list of rows of non-negative integers (at most
300 x 300). Return the smallest sum of the cells on a path from the top-left to the bottom-right
cell that moves only right or down (both corners included).""",
    reference="""
def min_path_sum(grid):
    cols = len(grid[0])
    best = [0] * cols
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if i == 0 and j == 0:
                best[j] = v
            elif i == 0:
                best[j] = best[j - 1] + v
            elif j == 0:
                best[j] = best[j] + v
            else:
                best[j] = min(best[j], best[j - 1]) + v
    return best[-1]
""",
    public=[[[[1, 3, 1], [1, 5, 1], [4, 2, 1]]], [[[1, 2, 3], [4, 5, 6]]]],
    hidden=[[[[7]]], [[[1], [2], [3]]], [[[5, 1, 9]]], [[_big(61 + r, 200, 0, 9) for r in range(200)]]],
    gen=lambda rng, i: [(lambda r, c: [rand_list(rng, c, 0, 9) for _ in range(r)])(rng.randint(1, 5), rng.randint(1, 5))],
    brute="def min_path_sum(g):\n    r, c = len(g), len(g[0])\n    def go(i, j):\n        if (i, j) == (r - 1, c - 1):\n            return g[i][j]\n        opts = []\n        if i + 1 < r:\n            opts.append(go(i + 1, j))\n        if j + 1 < c:\n            opts.append(go(i, j + 1))\n        return g[i][j] + min(opts)\n    return go(0, 0)\n",
    brute_limit=200,
))

add(P(
    id="largest-rectangle", title="Largest rectangle in a histogram", difficulty="hard",
    statement="""The first line holds n (1 <= n <= 10^5), the second n non-negative bar heights (each bar has width
1). Print the area of the largest axis-aligned rectangle that fits under the bars.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
heights = data[1:1 + data[0]] + [0]
stack = []
best = 0
for i, h in enumerate(heights):
    start = i
    while stack and stack[-1][1] >= h:
        start, top = stack.pop()
        best = max(best, top * (i - start))
    stack.append((start, h))
print(best)
""",
    public=["6\n2 1 5 6 2 3\n", "2\n2 4\n"],
    hidden=["1\n0\n", "1\n9\n", "5\n3 3 3 3 3\n", _array_input(_big(71, 20000, 0, 10**6)), _array_input(list(range(1, 20001)))],
    gen=lambda rng, i: _array_input(rand_list(rng, rng.randint(1, 25), 0, 10)),
    brute="n = int(input())\nh = list(map(int, input().split()))\nprint(max(min(h[i:j]) * (j - i) for i in range(n) for j in range(i + 1, n + 1)))\n",
    brute_limit=200,
))


def _expression(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return str(rng.randint(0, 20))
    op = rng.choice(["+", "-", "*"])
    left, right = _expression(rng, depth - 1), _expression(rng, depth - 1)
    text = f"{left} {op} {right}" if rng.random() < 0.5 else f"{left}{op}{right}"
    return f"({text})" if rng.random() < 0.4 else text


add(P(
    id="evaluate-expression", title="Evaluate an expression", difficulty="hard", fn="evaluate",
    statement="""Write a function evaluate(expr) that returns the integer value of an arithmetic expression made of
non-negative integers, the binary operators +, - and *, parentheses and spaces. * binds tighter than
+ and -, which associate to the left; there is no unary minus. len(expr) <= 10^4.""",
    reference="""
def evaluate(expr):
    tokens = []
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch.isdigit():
            j = i
            while j < len(expr) and expr[j].isdigit():
                j += 1
            tokens.append(int(expr[i:j]))
            i = j
            continue
        if ch in "+-*()":
            tokens.append(ch)
        i += 1
    pos = 0

    def atom():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            value = total()
            pos += 1
            return value
        return tok

    def product():
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            value *= atom()
        return value

    def total():
        nonlocal pos
        value = product()
        while pos < len(tokens) and tokens[pos] in ("+", "-"):
            op = tokens[pos]
            pos += 1
            rhs = product()
            value = value + rhs if op == "+" else value - rhs
        return value

    return total()
""",
    public=[["1 + 2 * 3"], ["(1 + 2) * 3 - 4"]],
    hidden=[["42"], ["2*3*4"], ["10 - 2 - 3"], ["((7))"], ["2 * (3 + 4) * 5 - 6"], [" + ".join(["1"] * 3000)]],
    gen=lambda rng, i: [_expression(rng, 4)],
    n_random=8,
    brute="def evaluate(expr):\n    return eval(expr, {'__builtins__': {}})\n",
))

add(P(
    id="subarray-sum-k", title="Subarrays with sum k", difficulty="hard",
    statement="""The first line holds n and k (1 <= n <= 10^5, |k| <= 10^9); the second n integers (possibly
negative). Print how many non-empty contiguous subarrays have sum exactly k.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n, k = data[0], data[1]
counts = {0: 1}
prefix = answer = 0
for x in data[2:2 + n]:
    prefix += x
    answer += counts.get(prefix - k, 0)
    counts[prefix] = counts.get(prefix, 0) + 1
print(answer)
""",
    public=["3 2\n1 1 1\n", "3 3\n1 2 3\n"],
    hidden=["1 0\n0\n", "4 0\n0 0 0 0\n", "5 -1\n-1 1 -1 1 -1\n", "20000 7\n" + ints(_big(81, 20000, -3, 3)) + "\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)} {rng.randint(-4, 4)}\n{ints(v)}\n")(rand_list(rng, rng.randint(1, 25), -3, 3)),
    n_random=8,
    brute="n, k = map(int, input().split())\na = list(map(int, input().split()))\nprint(sum(1 for i in range(n) for j in range(i + 1, n + 1) if sum(a[i:j]) == k))\n",
    brute_limit=200,
))

add(P(
    id="longest-palindrome", title="Longest palindromic substring", difficulty="hard", fn="longest_palindrome",
    statement="""Write a function longest_palindrome(s) that returns the longest substring of s that reads the same
forwards and backwards; when several have the greatest length, return the leftmost. len(s) <= 3000;
the empty string gives the empty string.""",
    reference="""
def longest_palindrome(s):
    best_start, best_len = 0, 0
    for center in range(2 * len(s) - 1):
        left = center // 2
        right = left + center % 2
        while left >= 0 and right < len(s) and s[left] == s[right]:
            left -= 1
            right += 1
        length = right - left - 1
        if length > best_len or (length == best_len and left + 1 < best_start):
            best_start, best_len = left + 1, length
    return s[best_start : best_start + best_len]
""",
    public=[["babad"], ["cbbd"]],
    hidden=[[""], ["a"], ["abcd"], ["forgeeksskeegfor"], ["ab" * 600]],
    gen=lambda rng, i: ["".join(rng.choice("ab") for _ in range(rng.randint(1, 12)))],
    n_random=8,
    brute="def longest_palindrome(s):\n    best = ''\n    for i in range(len(s)):\n        for j in range(i + 1, len(s) + 1):\n            t = s[i:j]\n            if t == t[::-1] and len(t) > len(best):\n                best = t\n    return best\n",
    brute_limit=100,
))

add(P(
    id="meeting-rooms", title="Meeting rooms", difficulty="hard",
    statement="""The first line holds n (1 <= n <= 10^5); each of the next n lines holds the start and end time of a
meeting (0 <= start < end <= 10^9), a half-open interval [start, end): a meeting ending at t and one
starting at t can share a room. Print the fewest rooms needed to hold every meeting.""",
    reference="""
import sys
data = list(map(int, sys.stdin.read().split()))
n = data[0]
events = []
for k in range(n):
    events.append((data[1 + 2 * k], 1))
    events.append((data[2 + 2 * k], -1))
events.sort()
rooms = best = 0
for _, delta in events:
    rooms += delta
    best = max(best, rooms)
print(best)
""",
    public=["3\n0 30\n5 10\n15 20\n", "2\n7 10\n2 4\n"],
    hidden=["1\n0 1\n", "2\n1 5\n5 10\n", "3\n1 10\n1 10\n1 10\n", "20000\n" + "".join(f"{s} {s + d}\n" for s, d in zip(_big(91, 20000, 0, 10**6), _big(92, 20000, 1, 5000)))],
    gen=lambda rng, i: (lambda ms: f"{len(ms)}\n" + "".join(f"{a} {a + b}\n" for a, b in ms))([(rng.randint(0, 20), rng.randint(1, 8)) for _ in range(rng.randint(1, 10))]),
    n_random=8,
    brute="import sys\nd = list(map(int, sys.stdin.read().split()))\nn = d[0]\nm = [(d[1 + 2 * k], d[2 + 2 * k]) for k in range(n)]\nprint(max(sum(1 for a, b in m if a <= t < b) for t in range(0, 40)))\n",
    brute_limit=120,
))

add(P(
    id="bipartite", title="Two-colouring a graph", difficulty="hard",
    statement="""The first line holds n and m (1 <= n <= 10^5, 0 <= m <= 2 * 10^5); each of the next m lines holds an
undirected edge a b (1 <= a, b <= n). Print YES if the vertices can be coloured with two colours so
that every edge joins vertices of different colours, and NO otherwise (a self-loop makes it
impossible).""",
    reference="""
import sys
from collections import deque
data = list(map(int, sys.stdin.read().split()))
n, m = data[0], data[1]
adj = [[] for _ in range(n + 1)]
for k in range(m):
    a, b = data[2 + 2 * k], data[3 + 2 * k]
    adj[a].append(b)
    adj[b].append(a)
colour = [-1] * (n + 1)
ok = True
for s in range(1, n + 1):
    if colour[s] != -1 or not ok:
        continue
    colour[s] = 0
    queue = deque([s])
    while queue and ok:
        u = queue.popleft()
        for v in adj[u]:
            if colour[v] == -1:
                colour[v] = 1 - colour[u]
                queue.append(v)
            elif colour[v] == colour[u]:
                ok = False
                break
print("YES" if ok else "NO")
""",
    public=["4 4\n1 2\n2 3\n3 4\n4 1\n", "3 3\n1 2\n2 3\n3 1\n"],
    hidden=["1 0\n", "1 1\n1 1\n", "5 2\n1 2\n4 5\n", "20000 19999\n" + "".join(f"{k} {k + 1}\n" for k in range(1, 20000))],
    gen=lambda rng, i: _edges_input(rng, rng.randint(1, 8), rng.randint(0, 8)),
    n_random=9,
    brute="import sys, itertools\nd = list(map(int, sys.stdin.read().split()))\nn, m = d[0], d[1]\ne = [(d[2 + 2 * k], d[3 + 2 * k]) for k in range(m)]\nprint('YES' if any(all(c[a - 1] != c[b - 1] for a, b in e) for c in itertools.product((0, 1), repeat=n)) else 'NO')\n",
    brute_limit=150,
))
