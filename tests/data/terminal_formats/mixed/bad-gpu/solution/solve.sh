python3 /app/train.py
