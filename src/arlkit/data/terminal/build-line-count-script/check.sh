set -e
printf '1\n2\n3\n4\n5\n' > /tmp/five
[ "$(./count.sh /tmp/five | tr -d ' ')" = 5 ]
[ "$(./count.sh sample.txt | tr -d ' ')" = 3 ]
