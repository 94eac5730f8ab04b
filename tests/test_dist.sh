#!/bin/sh
# tests/test_dist.sh - the release tarball (`make dist`) holds every file the
# repository tracks, so that a tarball builds, installs every public header
# and ships every lab. Compared in a git checkout only: `make distdir` lists
# what the tarball would hold, `git ls-files` what the project is. The
# comparison itself is tested with a planted file that git knows and the
# tarball lacks.
set -u
top_src=${TT_TOP_SRCDIR:-$(dirname "$0")/..}
top_build=${TT_TOP_BUILDDIR:-$top_src}
if ! command -v git >/dev/null 2>&1 || ! git -C "$top_src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "not a git checkout (or no git): nothing to compare the tarball with"; exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tt-dist.XXXXXX")
name="tt-dist-check.$$" # relative: automake builds the subdirectories' paths from it
trap 'rm -rf "$work" "$top_build/$name"' EXIT
failures=0
ok() { echo "ok - $1"; }
not_ok() { echo "NOT OK - $1"; failures=$((failures + 1)); }

# Files the repository tracks that a tarball has no use for.
not_shipped='^\.gitignore$'

# missing TRACKED SHIPPED: the tracked files (one per line) absent from the
# shipped ones, less those not meant to ship.
missing() { sort "$1" | grep -v -E "$not_shipped" | comm -23 - "$2"; }

if ! make -s -C "$top_build" distdir distdir="$name" >"$work/make.out" 2>&1; then
    not_ok "make distdir failed:"; tail -n 20 "$work/make.out"; exit 1
fi
(cd "$top_build/$name" && find . -type f | sed 's|^\./||' | sort) >"$work/shipped"
git -C "$top_src" ls-files >"$work/tracked"
missing "$work/tracked" "$work/shipped" >"$work/missing"
if [ -s "$work/missing" ]; then
    not_ok "tracked by git but not in the tarball ($(wc -l <"$work/missing") files; add them to a Makefile.am):"
    sed 's/^/    /' "$work/missing"
else
    ok "the tarball holds all $(grep -c -v -E "$not_shipped" "$work/tracked") tracked files ($(wc -l <"$work/shipped") with the generated ones)"
fi

# The check, fed a fault: a tracked lab the tarball lacks must be named.
{ cat "$work/tracked"; echo "doc/labs/lab9-planted.md"; } >"$work/tracked_planted"
if missing "$work/tracked_planted" "$work/shipped" | grep -qx "doc/labs/lab9-planted.md"; then
    ok "a planted file missing from the tarball is found"
else
    not_ok "a planted file missing from the tarball went unseen"
fi
[ "$failures" -eq 0 ] || exit 1
