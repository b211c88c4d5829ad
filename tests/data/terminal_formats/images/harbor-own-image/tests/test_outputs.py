from pathlib import Path


def test_result():
    assert Path("/app/answer.txt").read_text().strip() == "42"
