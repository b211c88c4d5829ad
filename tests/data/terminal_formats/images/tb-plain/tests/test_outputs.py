from pathlib import Path


def test_result():
    assert Path("/app/out/sorted.txt").read_text() == "apple\nkiwi\npear\n"
