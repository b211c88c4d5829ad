nohup python3 -m http.server 8765 --bind 127.0.0.1 --directory /app > /dev/null 2>&1 &
echo started > started.txt
