# one command per line, each one turn; then submit
tail -n +2 employees.csv | awk -F, '{s[$2] += $3; n[$2]++} END {for (d in s) printf "%s %.2f\n", d, s[d] / n[d]}' | sort > report.txt
