# one command per line, each one turn; then submit
tail -n 100 server.log > server.tmp && mv server.tmp server.log
