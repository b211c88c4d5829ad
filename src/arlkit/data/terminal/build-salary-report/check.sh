set -e
printf 'eng 105.00\nhr 65.00\nops 75.50\n' | cmp - report.txt
