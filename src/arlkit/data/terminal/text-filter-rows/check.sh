set -e
printf 'name,age,city\nbob,31,rome\ncid,30,lima\neve,45,bern\n' | cmp - adults.csv
