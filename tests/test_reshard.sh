#!/bin/sh
# tests/test_reshard.sh - checkpoints outlive the layout. A run on tp 2 x pp 3
# x dp 2 (12 ranks) stops at step 3 and writes its checkpoint collectively
# (MPI-IO, each rank its own slices); resumed on tp 1 pp 1 dp 1, tp 4 pp 1 dp 3
# and tp 1 pp 4 dp 1, every tensor reads back exactly (the data section
# written again from the new layout is byte-identical), and the next steps'
# losses equal those of an uninterrupted run within the oracle's loss
# tolerance (1e-5 relative). Resumed on the same layout, the run is bit-identical
# to an uninterrupted one.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 4 --dim 48 --heads 12 --seq 16 --batch 12 --micro-batches 2 --warmup 2 --sample-len 0 --quiet --eval-every 0"

# The data section of a safetensors file (after the 8-byte length and header).
data_of() {
    python3 -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", d[:8])[0]
sys.stdout.buffer.write(d[8 + n:])' "$1" > "$2"
}
command -v python3 >/dev/null || { echo "python3 missing: skipped"; exit 77; }

tt 1 $cfg --steps 6 --log "$work/straight.csv"
[ "$status" -eq 0 ] && ok "uninterrupted run on 1 GPU" || not_ok "uninterrupted run"
tt 12 $cfg --tp 2 --pp 3 --dp 2 --steps 6 --stop-at 3 --save "$work/ck.st"
[ "$status" -eq 0 ] && ok "tp2 pp3 dp2 stops at step 3 and saves" || not_ok "save on tp2 pp3 dp2"
data_of "$work/ck.st" "$work/ck.data"

for layout in "1 --tp 1 --pp 1 --dp 1" "12 --tp 4 --pp 1 --dp 3" "4 --tp 1 --pp 4 --dp 1"; do
    set -- $layout
    np=$1
    shift
    # each layout is judged on its own files, never on an earlier layout's
    rm -f "$work/again.st" "$work/again.data" "$work/resumed.csv"
    # Read and write back without training: the same global tensors.
    tt "$np" $cfg "$@" --resume "$work/ck.st" --steps 6 --stop-at 3 --save "$work/again.st"
    data_of "$work/again.st" "$work/again.data"
    if [ "$status" -eq 0 ] && cmp -s "$work/ck.data" "$work/again.data"; then
        ok "$*: resumed tensors identical (weights and Adam moments, byte for byte)"
    else
        not_ok "$*: tensors differ after resuming"
    fi
    # Train on: steps 3..5 against the uninterrupted run.
    tt "$np" $cfg "$@" --resume "$work/ck.st" --steps 6 --log "$work/resumed.csv"
    worst=$(awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next }
                     FNR > 1 { d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > w) w = d; n++ }
                     END { printf "%.2e %d", w, n }' "$work/straight.csv" "$work/resumed.csv")
    rel=${worst% *}
    rows=${worst#* }
    if [ "$status" -eq 0 ] && [ "$rows" -eq 3 ] && awk -v r="$rel" 'BEGIN { exit !(r < 1e-5) }'; then
        ok "$*: losses of steps 3-5 match the uninterrupted run (worst relative difference $rel, tolerance 1e-5)"
    else
        not_ok "$*: resumed losses: worst relative difference '$rel' over $rows steps"
    fi
done

# Same layout: bit-identical to running straight through.
tt 12 $cfg --tp 2 --pp 3 --dp 2 --steps 6 --save "$work/full.st"
tt 12 $cfg --tp 2 --pp 3 --dp 2 --resume "$work/ck.st" --steps 6 --save "$work/resumed.st"
if [ "$status" -eq 0 ] && cmp -s "$work/full.st" "$work/resumed.st"; then
    ok "tp2 pp3 dp2: stop at 3 + resume to 6 is bit-identical to 6 steps in one run"
else
    not_ok "same-layout resume differs from the uninterrupted run"
fi
finish
