from pathlib import Path


def test_result():
    assert Path("/app/server.conf").read_text() == "port=9090\n"
