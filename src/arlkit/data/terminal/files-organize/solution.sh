# one command per line, each one turn; then submit
cd inbox && for f in *.*; do mkdir -p "../${f##*.}" && mv "$f" "../${f##*.}/"; done
