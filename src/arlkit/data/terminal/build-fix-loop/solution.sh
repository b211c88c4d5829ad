# one command per line, each one turn; then submit
sed -i 's/-ge 0/-gt 0/' countdown.sh
