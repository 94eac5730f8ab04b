#!/bin/sh
# tests/test_layers.sh - the source tree keeps its dependency rules (layers in
# order, no cycle, MPI only through comm, and doc/design.md's module map
# with a row per file whose "uses" are its #include lines; see
# tests/check_layers.py), and the checker itself catches each kind of
# planted violation.
set -u
root="${TT_SRCDIR:-$(dirname "$0")}/.."
checker="$root/tests/check_layers.py"
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found: skipping the layer check"; exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tt-layers.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
ok() { echo "ok - $1"; }
not_ok() { echo "NOT OK - $1"; failures=$((failures + 1)); }

if python3 "$checker" "$root" >"$work/out" 2>&1; then
    ok "the tree: $(cat "$work/out")"
else
    not_ok "the tree breaks its rules:"; cat "$work/out"
fi

# plant NAME FILE LINE EXPECT: a copy of the tree with LINE appended to FILE
# must be refused with a message containing EXPECT.
plant() {
    rm -rf "$work/tree"; mkdir -p "$work/tree"
    cp -R "$root/src" "$root/include" "$root/doc" "$work/tree/"
    printf '%s\n' "$3" >>"$work/tree/$2"
    if python3 "$checker" "$work/tree" >"$work/out" 2>&1; then
        not_ok "$1: the checker accepted it"
    elif grep -q -- "$4" "$work/out"; then
        ok "$1: refused ($(grep -m1 -- "$4" "$work/out"))"
    else
        not_ok "$1: refused without naming it:"; cat "$work/out"
    fi
}
plant "core calling app" src/core/common.c '#include "tt/app/run.h"' \
    "src/core/common.c (layer core) includes tt/app/run.h"
plant "model calling show" include/tt/model/model.h '#include "tt/show/trace.h"' \
    "of the later layer show"
# A cycle needs two files changed: data includes events, events includes data.
rm -rf "$work/tree"; mkdir -p "$work/tree"; cp -R "$root/src" "$root/include" "$root/doc" "$work/tree/"
printf '#include "tt/core/events.h"\n' >>"$work/tree/include/tt/core/data.h"
printf '#include "tt/core/data.h"\n' >>"$work/tree/include/tt/core/events.h"
if python3 "$checker" "$work/tree" >"$work/out" 2>&1; then
    not_ok "a cycle core/data -> core/events -> core/data: accepted"
elif grep -q "dependency cycle: core/data -> core/events -> core/data" "$work/out"; then
    ok "a cycle core/data -> core/events -> core/data: refused"
else
    not_ok "a cycle: refused without naming it:"; cat "$work/out"
fi
plant "an all-reduce outside comm" src/train/validate.c \
    'static void bad(void) { int x = 0; MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }' \
    "src/train/validate.c:[0-9]* calls MPI_Allreduce directly"
plant "an include the module map's uses column leaves out" src/show/plot.c '#include "tt/core/faults.h"' \
    "row src/show/plot.c: uses is not its #include lines: missing core/faults"
plant "a file missing from the module map" src/core/zero_stub.c '/* a new module */' \
    "src/core/zero_stub.c has no row in the module map"
[ "$failures" -eq 0 ] || exit 1
