from pathlib import Path


def test_result():
    assert Path("/app/output.txt").read_text()
