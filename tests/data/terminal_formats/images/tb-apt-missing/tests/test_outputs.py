from pathlib import Path


def test_result():
    assert Path("/app/prog").exists()
