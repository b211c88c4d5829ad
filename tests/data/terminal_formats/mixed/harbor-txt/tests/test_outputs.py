from pathlib import Path


def test_total():
    assert Path("/app/total.txt").read_text().strip() == "60"
