#!/usr/bin/env bash
# Is a candidate repository new to the project? The novelty rule of issue 22's protocol:
# "repositories nobody here read before". Usage: benchmarks/review/novelty.sh owner/name ...
# Usage with a reading under construction: novelty.sh --building unseen-2026-12xyz owner/name ...
# Prints one verdict per candidate:
#   NEW                      not read, no copy of a read repository, not named in a tracked file
#   READ-REPO                already read (a reading's SOURCES.txt, or a vendored folder)
#   SAME-NAME-AS-A-READ-REPO probably a fork or copy of a read repository
#   MENTIONED                its owner/name is in a tracked file (a corpus source, a question's thread)
#   OWNER-HAS-N-READ-REPOS   allowed only for an organisation (at most 3 per reading), never for
#                            an individual whose code was read
# A bare name that happens to be a common word, or an owner named only in an earlier reading's
# drop list (dropped, never read), does not make a repository read.
# `--building unseen-2026-12xyz` (first argument): the reading being built; its own vendored
# repositories do not count as read, so a builder can re-check its list after vendoring.
set -euo pipefail
shopt -s nullglob
root=$(cd "$(dirname "$0")/../.." && pwd)
building=""
if [ "${1:-}" = "--building" ]; then building=${2:?--building needs a reading folder name}; shift 2; fi
read_list=$(mktemp)
trap 'rm -f "$read_list"' EXIT
{
  sources=("$root"/benchmarks/review/*/SOURCES.txt "$root"/benchmarks/review/*/*/SOURCE.txt)
  for f in "${sources[@]}"; do
    case "$f" in "$root/benchmarks/review/$building/"*) [ -n "$building" ] && continue ;; esac
    sed -n 's#^repository: *https://github.com/##p' "$f"
  done
  for d in "$root"/benchmarks/review/*/*__*/; do
    case "$d" in "$root/benchmarks/review/$building/"*) [ -n "$building" ] && continue ;; esac
    basename "$d" | sed 's#__#/#'
  done
} | sed 's#/*$##' | tr 'A-Z' 'a-z' | sort -u > "$read_list"
for c in "$@"; do
  lc=$(echo "$c" | tr 'A-Z' 'a-z'); owner=${lc%%/*}; name=${lc#*/}
  if grep -qxF "$lc" "$read_list"; then echo "READ-REPO $c"; continue; fi
  # Not `grep -q` at the end of a pipe: it exits at the first match, `cut` then dies of SIGPIPE,
  # and under pipefail the test reads as "no match" (a copy reported NEW now and then).
  if cut -d/ -f2 "$read_list" | grep -xF "$name" > /dev/null; then
    echo "SAME-NAME-AS-A-READ-REPO $c: $(grep "/$name\$" "$read_list" | head -3 | tr '\n' ' ')"; continue
  fi
  mentioned=$(git -C "$root" grep -ilF "$lc" -- . ':!benchmarks/review/unseen-*/README.md' \
    ':!benchmarks/review/realcode/*__*' ${building:+":!benchmarks/review/$building/*"} 2>/dev/null \
    | head -3 | tr '\n' ' ' || true)
  if [ -n "$mentioned" ]; then echo "MENTIONED $c in $mentioned"; continue; fi
  n=$(cut -d/ -f1 "$read_list" | grep -cxF "$owner" || true)
  if [ "$n" -gt 0 ]; then echo "OWNER-HAS-$n-READ-REPOS $c"; continue; fi
  echo "NEW $c"
done
