import subprocess


def test_greets_by_name():
    out = subprocess.run(["/app/greet.sh", "Ada"], capture_output=True, text=True, timeout=10)
    assert out.stdout == "Hello, Ada!\n"
