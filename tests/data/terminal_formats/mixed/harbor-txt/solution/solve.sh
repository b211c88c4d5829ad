#!/bin/bash
cd /app
awk -F, 'NR > 1 { s += $2 } END { print s }' data.csv > total.txt
