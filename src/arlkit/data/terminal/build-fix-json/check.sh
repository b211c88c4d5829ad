set -e
[ "$(python3 app.py)" = 'ok: port 8080' ]
python3 -c 'import json; d = json.load(open("settings.json")); assert d == {"port": 8080, "debug": False}'
