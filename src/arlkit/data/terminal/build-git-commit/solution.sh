# one command per line, each one turn; then submit
git init -q
git add -A
git -c user.name=agent -c user.email=agent@example.org commit -q -m initial
