#!/usr/bin/env bash
# Guards a submission against committed build outputs: lists files added since BASE
# (default: the first parent of today's work, given as an argument) that are larger than
# 512 KiB or look generated, and prints the packed size of the commits and the total
# size of their diffs. A submission is refused above 512 MiB packed or 256 MiB of diffs.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/check-size.sh BASE_COMMIT}
echo "commits since $base: $(git rev-list --count "$base"..HEAD)"
echo "diff text of all commits: $(git log -p --format= "$base"..HEAD | wc -c) bytes"
echo "packed: $(git bundle create /tmp/size-check.bundle "$base"..HEAD 2>/dev/null && stat -c %s /tmp/size-check.bundle) bytes"
rm -f /tmp/size-check.bundle
echo "large or generated-looking files touched since $base:"
git log --format= --name-only "$base"..HEAD | sort -u | while read -r f; do
    [ -n "$f" ] || continue
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 524288 ]; then echo "  large: $f"; fi
    case "$f" in */target/*|target/*|*.o|*.so|*.a|*/build/*|out/*|*/out/*) echo "  generated? $f";; esac
done
