set -e
printf '[server]\nport = 80\nhost = a\n[db]\nname = x\n' | cmp - clean.ini
