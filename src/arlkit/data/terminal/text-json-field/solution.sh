# one command per line, each one turn; then submit
python3 -c 'import json; print(json.load(open("package.json"))["version"])' > version.txt
