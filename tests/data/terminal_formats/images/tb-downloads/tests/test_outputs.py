from pathlib import Path


def test_result():
    assert Path("/app/out.txt").read_text()
