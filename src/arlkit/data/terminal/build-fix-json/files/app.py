import json

with open('settings.json') as fh:
    settings = json.load(fh)
print(f"ok: port {settings['port']}")
