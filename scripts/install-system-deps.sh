#!/usr/bin/env bash
# System packages the test suite uses, installed from Debian's packages when missing:
#   bubblewrap - the sandbox's strongest isolation level (it falls back to `unshare` without it)
#   chromium   - renders `arlkit report`'s HTML in the report test
#   make, gcc, patch, bc, git - tools the shipped terminal tasks' solutions and checkers use
#   cmake, g++ - build ALFWorld's planner (fast-downward-textworld) from its sdist
# Needs root and apt-get; elsewhere it only says what is missing (the affected tests then say why
# they skip).
set -u
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
for tool in make gcc g++ cmake patch bc git; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null) \
    || echo "warning: could not install ${missing[*]}; the sandbox uses a weaker level and the report test skips"
else
  echo "note: missing ${missing[*]} (install them as root for the full test suite)"
fi
exit 0
