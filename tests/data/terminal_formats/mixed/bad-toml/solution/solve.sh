echo hello > /app/hello.txt
