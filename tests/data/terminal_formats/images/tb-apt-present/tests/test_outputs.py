from pathlib import Path


def test_result():
    assert Path("/app/built.txt").read_text() == "built\n"
