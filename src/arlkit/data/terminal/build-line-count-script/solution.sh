# one command per line, each one turn; then submit
printf '#!/bin/sh\nwc -l < "$1"\n' > count.sh
chmod +x count.sh
