set -e
[ "$(git log --format=%s)" = initial ]
[ -z "$(git status --porcelain)" ]
git ls-files | grep -qx src/app.py
