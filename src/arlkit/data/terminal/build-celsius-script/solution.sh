# one command per line, each one turn; then submit
printf '#!/bin/sh\nawk -v c="$1" %s\n' "'BEGIN {printf \"%.1f\\n\", c * 9 / 5 + 32}'" > convert.sh
chmod +x convert.sh
