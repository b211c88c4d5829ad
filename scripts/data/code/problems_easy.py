"""Easy problems: one idea, a few lines, edge cases in the input format."""

from __future__ import annotations

import string

from spec import P, ints, rand_list

PROBLEMS: list[P] = []


def add(p: P) -> None:
    PROBLEMS.append(p)


add(P(
    id="sum-of-two", title="Sum of two integers", difficulty="easy",
    statement="""Read two integers a and b (|a|, |b| <= 10^18) separated by a space on one line and print a + b.""",
    reference="""
a, b = map(int, input().split())
print(a + b)
""",
    public=["1 2\n", "-5 5\n"],
    hidden=["1000000000000000000 1000000000000000000\n", "0 0\n", "-7 -8\n"],
    gen=lambda rng, i: f"{rng.randint(-10**18, 10**18)} {rng.randint(-10**18, 10**18)}\n",
))

add(P(
    id="largest-value", title="Largest value", difficulty="easy", fn="largest",
    statement="""Write a function largest(nums) that returns the largest integer of the non-empty list nums.""",
    reference="""
def largest(nums):
    best = nums[0]
    for x in nums[1:]:
        if x > best:
            best = x
    return best
""",
    public=[[[3, 9, 2]], [[-4, -2, -9]]],
    hidden=[[[7]], [[5, 5, 5]], [[-1, 0, -1]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(1, 30), -1000, 1000)],
    brute="def largest(nums):\n    return sorted(nums)[-1]\n",
))

add(P(
    id="count-vowels", title="Count the vowels", difficulty="easy", fn="count_vowels",
    statement="""Write a function count_vowels(s) that returns how many characters of the string s are vowels
(a, e, i, o, u, in lower or upper case). The letter y is not a vowel.""",
    reference="""
def count_vowels(s):
    return sum(1 for ch in s if ch.lower() in "aeiou")
""",
    public=[["Hello World"], ["rhythm"]],
    hidden=[[""], ["AEIOUaeiou"], ["Yay! Queueing..."], ["x" * 50 + "E"]],
    gen=lambda rng, i: ["".join(rng.choice(string.ascii_letters + " !?") for _ in range(rng.randint(0, 60)))],
))

add(P(
    id="reverse-words", title="Reverse the words", difficulty="easy",
    statement="""Read one line of text and print its words in reverse order, separated by single spaces.
Words are maximal runs of non-space characters; the line may contain several spaces between words and
leading or trailing spaces. If the line has no words, print an empty line.""",
    reference="""
line = input()
print(" ".join(reversed(line.split())))
""",
    public=["the quick brown fox\n", "  hello   world  \n"],
    hidden=["single\n", "   \n", "a b c d e f g\n", "x  y\n"],
    gen=lambda rng, i: "  ".join("".join(rng.choice("abcxyz") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 12))) + "\n",
))

add(P(
    id="fizzbuzz", title="FizzBuzz", difficulty="easy",
    statement="""Read an integer n (1 <= n <= 1000). For i = 1..n print one line: "FizzBuzz" if i is divisible by
both 3 and 5, "Fizz" if only by 3, "Buzz" if only by 5, and i itself otherwise.""",
    reference="""
n = int(input())
for i in range(1, n + 1):
    if i % 15 == 0:
        print("FizzBuzz")
    elif i % 3 == 0:
        print("Fizz")
    elif i % 5 == 0:
        print("Buzz")
    else:
        print(i)
""",
    public=["5\n", "15\n"],
    hidden=["1\n", "3\n", "30\n", "1000\n"],
    gen=lambda rng, i: f"{rng.randint(1, 200)}\n",
    n_random=3,
))

add(P(
    id="is-palindrome", title="Palindrome check", difficulty="easy", fn="is_palindrome",
    statement="""Write a function is_palindrome(s) that returns True when the string s reads the same forwards and
backwards once every character that is not a letter or a digit is removed and letters are compared
without regard to case, and False otherwise. An empty string is a palindrome.""",
    reference="""
def is_palindrome(s):
    kept = [ch.lower() for ch in s if ch.isalnum()]
    return kept == kept[::-1]
""",
    public=[["A man, a plan, a canal: Panama"], ["race a car"]],
    hidden=[[""], ["!!"], ["ab"], ["No 'x' in Nixon"], ["12321"], ["123421"]],
    gen=lambda rng, i: [(lambda h: h + h[::-1][rng.randint(0, 1):])("".join(rng.choice("abAB1 ,") for _ in range(rng.randint(0, 8))))
                        if i % 2 == 0 else "".join(rng.choice("abc,") for _ in range(rng.randint(2, 9)))],
))

add(P(
    id="second-largest", title="Second largest distinct value", difficulty="easy",
    statement="""The first line holds n (1 <= n <= 1000), the second n integers. Print the second largest distinct
value among them, or NONE when all values are equal.""",
    reference="""
n = int(input())
values = sorted(set(map(int, input().split())))
print(values[-2] if len(values) >= 2 else "NONE")
""",
    public=["5\n3 1 4 1 5\n", "3\n7 7 7\n"],
    hidden=["1\n42\n", "2\n-1 -2\n", "4\n10 10 9 9\n", "6\n5 4 5 3 5 4\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)}\n{ints(v)}\n")(rand_list(rng, rng.randint(1, 40), -50, 50)),
    brute="n = int(input())\nv = list(map(int, input().split()))\nm = max(v)\nrest = [x for x in v if x != m]\nprint(max(rest) if rest else 'NONE')\n",
))

add(P(
    id="to-fahrenheit", title="Celsius to Fahrenheit", difficulty="easy", fn="to_fahrenheit",
    statement="""Write a function to_fahrenheit(celsius) that converts a temperature in degrees Celsius (a float)
to degrees Fahrenheit: F = C * 9 / 5 + 32. Answers within 1e-6 are accepted.""",
    reference="""
def to_fahrenheit(celsius):
    return celsius * 9 / 5 + 32
""",
    public=[[100.0], [-40.0]],
    hidden=[[0.0], [36.6], [-273.15]],
    gen=lambda rng, i: [round(rng.uniform(-100, 100), 3)],
    n_random=3,
))

add(P(
    id="digit-sum", title="Digit sum", difficulty="easy", fn="digit_sum",
    statement="""Write a function digit_sum(n) that returns the sum of the decimal digits of the integer n.
For a negative n, ignore the sign.""",
    reference="""
def digit_sum(n):
    return sum(int(d) for d in str(abs(n)))
""",
    public=[[1234], [-505]],
    hidden=[[0], [9], [10**30 - 1], [-1]],
    gen=lambda rng, i: [rng.randint(-10**12, 10**12)],
    brute="def digit_sum(n):\n    n = abs(n)\n    t = 0\n    while n:\n        t += n % 10\n        n //= 10\n    return t\n",
))

add(P(
    id="count-evens", title="Count the even numbers", difficulty="easy",
    statement="""The first line holds n (0 <= n <= 10^5), the second line n integers (the line may be empty when
n is 0). Print how many of the integers are even.""",
    reference="""
import sys
data = sys.stdin.read().split()
n = int(data[0])
print(sum(1 for x in data[1:1 + n] if int(x) % 2 == 0))
""",
    public=["4\n1 2 3 4\n", "3\n-2 0 7\n"],
    hidden=["0\n\n", "1\n1\n", "5\n2 4 6 8 10\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)}\n{ints(v)}\n")(rand_list(rng, rng.randint(0, 500), -10**6, 10**6)),
))

add(P(
    id="factorial", title="Factorial", difficulty="easy", fn="factorial",
    statement="""Write a function factorial(n) that returns n! for 0 <= n <= 60 (0! = 1). The result is an exact
integer.""",
    reference="""
def factorial(n):
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result
""",
    public=[[5], [0]],
    hidden=[[1], [20], [60]],
    gen=lambda rng, i: [rng.randint(2, 60)],
    n_random=3,
    brute="import math\ndef factorial(n):\n    return math.factorial(n)\n",
))

add(P(
    id="gcd-lcm", title="GCD and LCM", difficulty="easy",
    statement="""Read two positive integers a and b (1 <= a, b <= 10^12) on one line. Print their greatest common
divisor and their least common multiple, separated by a space.""",
    reference="""
a, b = map(int, input().split())
x, y = a, b
while y:
    x, y = y, x % y
print(x, a // x * b)
""",
    public=["12 18\n", "7 5\n"],
    hidden=["1 1\n", "1000000000000 999999999999\n", "36 36\n", "1 999\n"],
    gen=lambda rng, i: f"{rng.randint(1, 10**6) * rng.randint(1, 1000)} {rng.randint(1, 10**6) * rng.randint(1, 1000)}\n",
    brute="import math\na, b = map(int, input().split())\nprint(math.gcd(a, b), a * b // math.gcd(a, b))\n",
))

add(P(
    id="most-frequent-char", title="Most frequent character", difficulty="easy", fn="most_frequent",
    statement="""Write a function most_frequent(s) that returns the character that occurs most often in the
non-empty string s. When several characters tie, return the one that comes first in alphabetical
(code point) order.""",
    reference="""
def most_frequent(s):
    counts = {}
    for ch in s:
        counts[ch] = counts.get(ch, 0) + 1
    best = max(counts.values())
    return min(ch for ch, c in counts.items() if c == best)
""",
    public=[["banana"], ["abcabc"]],
    hidden=[["z"], ["zzyy"], ["Aa"], ["mississippi"]],
    gen=lambda rng, i: ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 30)))],
    brute="def most_frequent(s):\n    return sorted(set(s), key=lambda c: (-s.count(c), c))[0]\n",
))

add(P(
    id="running-sum", title="Running sum", difficulty="easy", fn="running_sum",
    statement="""Write a function running_sum(nums) that returns the list of prefix sums of nums: element i of the
result is nums[0] + ... + nums[i]. An empty list gives an empty list.""",
    reference="""
def running_sum(nums):
    out, total = [], 0
    for x in nums:
        total += x
        out.append(total)
    return out
""",
    public=[[[1, 2, 3, 4]], [[]]],
    hidden=[[[5]], [[-1, 1, -1, 1]], [[0, 0, 0]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(0, 25), -100, 100)],
    brute="def running_sum(nums):\n    return [sum(nums[:i + 1]) for i in range(len(nums))]\n",
))

add(P(
    id="leap-year", title="Leap years", difficulty="easy",
    statement="""The first line holds t (1 <= t <= 100); each of the next t lines holds a year y (1 <= y <= 10^9).
For each year print "Leap" if it is a leap year in the Gregorian calendar (divisible by 4, except
years divisible by 100 that are not divisible by 400) and "Common" otherwise.""",
    reference="""
t = int(input())
for _ in range(t):
    y = int(input())
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    print("Leap" if leap else "Common")
""",
    public=["3\n2000\n1900\n2024\n", "1\n2023\n"],
    hidden=["4\n4\n100\n400\n1\n", "2\n1600\n1700\n"],
    gen=lambda rng, i: (lambda ys: f"{len(ys)}\n" + "".join(f"{y}\n" for y in ys))([rng.choice([rng.randint(1, 3000), rng.randint(1, 30) * 100]) for _ in range(rng.randint(1, 20))]),
    n_random=4,
))

add(P(
    id="dedupe", title="Remove duplicates", difficulty="easy", fn="dedupe",
    statement="""Write a function dedupe(items) that returns a new list with the duplicates of items removed,
keeping the first occurrence of each value and the original order.""",
    reference="""
def dedupe(items):
    seen = set()
    out = []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
""",
    public=[[[3, 1, 3, 2, 1]], [[]]],
    hidden=[[[1, 1, 1]], [[5, 4, 3]], [["a", "b", "a"]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(0, 30), 0, 9)],
    brute="def dedupe(items):\n    return [x for i, x in enumerate(items) if x not in items[:i]]\n",
))

add(P(
    id="transpose", title="Transpose a matrix", difficulty="easy",
    statement="""The first line holds r and c (1 <= r, c <= 50); the next r lines hold c integers each. Print the
transposed matrix: c lines of r integers separated by single spaces.""",
    reference="""
r, c = map(int, input().split())
rows = [input().split() for _ in range(r)]
for j in range(c):
    print(" ".join(rows[i][j] for i in range(r)))
""",
    public=["2 3\n1 2 3\n4 5 6\n", "1 1\n7\n"],
    hidden=["3 1\n1\n2\n3\n", "1 4\n-1 0 1 2\n"],
    gen=lambda rng, i: (lambda r, c: f"{r} {c}\n" + "".join(ints(rand_list(rng, c, -9, 99)) + "\n" for _ in range(r)))(rng.randint(1, 8), rng.randint(1, 8)),
    n_random=4,
))

add(P(
    id="title-case", title="Title case", difficulty="easy", fn="title_case",
    statement="""Write a function title_case(s) that returns s with the first letter of every word in upper case and
every other letter in lower case. Words are separated by single spaces; s contains only ASCII letters
and spaces and has no leading or trailing spaces (it may be empty).""",
    reference="""
def title_case(s):
    return " ".join(w[:1].upper() + w[1:].lower() for w in s.split(" ")) if s else ""
""",
    public=[["hello wORLD"], ["a"]],
    hidden=[[""], ["ALL CAPS HERE"], ["x y z"], ["mIxEd"]],
    gen=lambda rng, i: [" ".join("".join(rng.choice("abcXYZ") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 5)))],
))

add(P(
    id="word-count", title="Count words", difficulty="easy",
    statement="""Read all of standard input (any number of lines, possibly none) and print the number of words it
contains. A word is a maximal run of characters that are not spaces, tabs or newlines.""",
    reference="""
import sys
print(len(sys.stdin.read().split()))
""",
    public=["hello world\nthis is arlkit\n", ""],
    hidden=["   \n\n  \n", "one\n", "a\tb\tc\nd e\n"],
    gen=lambda rng, i: "".join(rng.choice(["word", " ", "\n", "\t", "x"]) for _ in range(rng.randint(0, 40))),
    n_random=4,
))

add(P(
    id="spread", title="Spread of a list", difficulty="easy", fn="spread",
    statement="""Write a function spread(nums) that returns the difference between the largest and the smallest
value of nums, or 0 when nums is empty.""",
    reference="""
def spread(nums):
    return max(nums) - min(nums) if nums else 0
""",
    public=[[[4, 9, 1]], [[]]],
    hidden=[[[5]], [[-3, -3]], [[-10, 10]]],
    gen=lambda rng, i: [rand_list(rng, rng.randint(0, 20), -1000, 1000)],
))

add(P(
    id="to-binary", title="Binary representation", difficulty="easy", fn="to_binary",
    statement="""Write a function to_binary(n) that returns the binary representation of the non-negative integer n
as a string of 0s and 1s without leading zeros ("0" for zero). Do not return a "0b" prefix.""",
    reference="""
def to_binary(n):
    if n == 0:
        return "0"
    digits = []
    while n:
        digits.append(str(n % 2))
        n //= 2
    return "".join(reversed(digits))
""",
    public=[[5], [0]],
    hidden=[[1], [2], [1023], [2**40]],
    gen=lambda rng, i: [rng.randint(0, 10**9)],
    brute="def to_binary(n):\n    return format(n, 'b')\n",
))

add(P(
    id="above-average", title="Days above average", difficulty="easy",
    statement="""The first line holds n (1 <= n <= 1000), the second line n integer temperatures. Print how many
temperatures are strictly greater than the average of all n temperatures.""",
    reference="""
n = int(input())
temps = list(map(int, input().split()))
total = sum(temps)
print(sum(1 for t in temps if t * n > total))
""",
    public=["4\n1 2 3 4\n", "3\n5 5 5\n"],
    hidden=["1\n-7\n", "5\n-1 -2 -3 -4 100\n", "3\n1 1 2\n"],
    gen=lambda rng, i: (lambda v: f"{len(v)}\n{ints(v)}\n")(rand_list(rng, rng.randint(1, 60), -30, 40)),
    brute="n = int(input())\nt = list(map(int, input().split()))\nfrom fractions import Fraction\navg = Fraction(sum(t), n)\nprint(len([x for x in t if x > avg]))\n",
))
