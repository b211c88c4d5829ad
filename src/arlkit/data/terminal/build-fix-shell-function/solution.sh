# one command per line, each one turn; then submit
sed -i 's/\$1 - \$2/$1 + $2/' calc.sh
