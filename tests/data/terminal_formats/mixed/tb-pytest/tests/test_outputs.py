from pathlib import Path


def test_upper_file_exists():
    assert Path("/app/upper.txt").exists()


def test_lines_are_upper_case():
    assert Path("/app/upper.txt").read_text().split() == ["ADA", "GRACE", "LINUS"]
