from pathlib import Path


def test_unique_sorted_words():
    assert Path("/app/unique.txt").read_text().split("\n") == ["apple", "fig", "pear", ""]
