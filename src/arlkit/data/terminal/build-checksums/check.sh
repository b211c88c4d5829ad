set -e
cd release
sha256sum -c --quiet SHA256SUMS
[ "$(wc -l < SHA256SUMS)" -eq 3 ]
