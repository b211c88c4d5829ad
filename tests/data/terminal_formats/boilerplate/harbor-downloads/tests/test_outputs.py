def test_hello():
    assert open("/app/hello.txt").read() == open("/tests/expected.txt").read()
