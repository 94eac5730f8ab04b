#!/bin/sh
# tests/min_gpu_mem.sh - the smallest --gpu-mem (in KiB) with which a layout
# starts training, found by bisection on the program's own refusal: the budget
# is checked against every GPU's account before anything is allocated, so one
# step per probe is enough. The figure the program prints as each GPU's peak
# (--report memory) should equal it to within the KiB rounding: this is the
# outside check of that claim (doc/memory.md quotes both).
# Usage: min_gpu_mem.sh NP TT_BIN [FLAGS...]   (MPIRUN overrides mpirun)
set -u
np=$1
bin=$2
shift 2
. "$(dirname "$0")/launcher.sh"
launch=$TT_MPIRUN
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# 0: it trains; 1: refused for memory; anything else stops the search.
fits() {
    $launch -np "$np" "$bin" "$@" --steps 1 --eval-every 0 --sample-len 0 --no-spot-check \
        --quiet --gpu-mem "$k"K </dev/null >"$out" 2>&1 && return 0
    grep -q "out of memory\|--gpu-mem is" "$out" && return 1
    echo "min_gpu_mem.sh: the run with --gpu-mem ${k}K failed for another reason:" >&2
    cat "$out" >&2
    exit 2
}
lo=1 hi=64
k=$hi
while ! fits "$@"; do # grow until it fits
    lo=$hi
    hi=$((hi * 2))
    k=$hi
    [ "$hi" -gt 1073741824 ] && { echo "does not fit in 1 TiB" >&2; exit 1; }
done
while [ $((hi - lo)) -gt 1 ]; do # lo does not fit, hi fits
    k=$(((lo + hi) / 2))
    if fits "$@"; then hi=$k; else lo=$k; fi
done
echo "${hi}K"
