# one command per line, each one turn; then submit
sed -i 's#http://#https://#g' links.txt
