# one command per line, each one turn; then submit
sed -i 's/"debug": false,/"debug": false/' settings.json
