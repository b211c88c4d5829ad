# one command per line, each one turn; then submit
cd release && sha256sum * > SHA256SUMS
