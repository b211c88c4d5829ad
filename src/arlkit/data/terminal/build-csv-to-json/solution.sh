# one command per line, each one turn; then submit
python3 -c 'import csv, json; json.dump({r["name"]: int(r["qty"]) for r in csv.DictReader(open("items.csv"))}, open("inventory.json", "w"))'
