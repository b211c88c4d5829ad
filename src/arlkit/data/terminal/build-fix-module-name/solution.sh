# one command per line, each one turn; then submit
mv helper.py helpers.py
