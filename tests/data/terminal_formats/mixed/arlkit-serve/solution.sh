python3 -c "import functools, http.server, os, sys; server = http.server.ThreadingHTTPServer(('127.0.0.1', 8765), functools.partial(http.server.SimpleHTTPRequestHandler, directory='/app')); os.fork() and sys.exit(0); os.setsid(); server.serve_forever()" < /dev/null > /dev/null 2>&1
echo started > started.txt
