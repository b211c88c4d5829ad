# one command per line, each one turn; then submit
mkdir -p out && tar xzf bundle.tar.gz -C out
