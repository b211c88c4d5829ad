set -e
python3 -c 'import json; assert json.load(open("inventory.json")) == {"bolt": 12, "nut": 40, "gear": 3}'
