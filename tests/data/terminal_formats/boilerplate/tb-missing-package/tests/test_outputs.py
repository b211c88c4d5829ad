def test_hello():
    assert open("/app/hello.txt").read() == "hello\n"
