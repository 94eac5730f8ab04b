#!/bin/sh
# tests/test_resume.sh - exact resume: 20 steps in one run and 10 steps
# (stopped with --stop-at, on the 20-step schedule) + a resumed run to 20 give
# bit-identical checkpoints and identical per-step losses. The independent
# reason: the two paths must compute the same arithmetic in the same order.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 2 --dim 32 --heads 4 --seq 32 --batch 4 --micro-batches 2 --warmup 3 --sample-len 0 --quiet --eval-every 0"

tt 1 $cfg --steps 20 --save "$work/full.safetensors" --log "$work/full.csv"
[ "$status" -eq 0 ] && ok "20 steps in one run" || not_ok "20 steps in one run"
tt 1 $cfg --steps 20 --stop-at 10 --save "$work/half.safetensors" --log "$work/a.csv"
[ "$status" -eq 0 ] && ok "first 10 steps" || not_ok "first 10 steps"
tt 1 --resume "$work/half.safetensors" --save "$work/resumed.safetensors" --log "$work/b.csv" --sample-len 0 --quiet --eval-every 0
[ "$status" -eq 0 ] && ok "resume to 20" || not_ok "resume to 20"

if cmp -s "$work/full.safetensors" "$work/resumed.safetensors"; then
    ok "checkpoints bit-identical (weights, Adam moments, metadata)"
else
    not_ok "checkpoints differ: $(cmp "$work/full.safetensors" "$work/resumed.safetensors")"
fi
# Losses: columns step,loss,lr,grad_norm must match row for row.
cut -d, -f1-4 "$work/full.csv" > "$work/full4"
{ cut -d, -f1-4 "$work/a.csv"; tail -n +2 "$work/b.csv" | cut -d, -f1-4; } > "$work/split4"
if [ "$(wc -l < "$work/full4")" -eq 21 ] && cmp -s "$work/full4" "$work/split4"; then
    ok "losses, lr and grad norms identical for all 20 steps"
else
    not_ok "logs differ"; diff "$work/full4" "$work/split4" | head
fi
# The resumed run started at step 10.
if [ "$(sed -n 2p "$work/b.csv" | cut -d, -f1)" = 10 ]; then ok "resumed at step 10"; else not_ok "resumed log does not start at step 10"; fi

# A resumed run continues the log it finds: resumed onto a.csv itself, the
# rows of steps 0-9 stay and steps 10-19 follow, so the one file equals the
# uninterrupted run's log. A row past the checkpoint (as a killed run leaves
# it) is dropped, since that step runs again.
cp "$work/a.csv" "$work/c.csv"
echo "10,9.99,0.1,0.1,1.0,1.0," >> "$work/c.csv"
tt 1 --resume "$work/half.safetensors" --log "$work/c.csv" --sample-len 0 --quiet --eval-every 0
cut -d, -f1-4 "$work/c.csv" > "$work/c4"
if [ "$status" -eq 0 ] && cmp -s "$work/full4" "$work/c4"; then
    ok "resumed onto the same log: one file, rows 0-19, the stale row 10 replaced"
else
    not_ok "log continued on resume differs (exit $status)"; diff "$work/full4" "$work/c4" | head
fi
# A resumed run may change --clock: each row's last column names the clock of
# its ms, so the continued log says where the figures change meaning.
cp "$work/a.csv" "$work/d.csv"
tt 1 --resume "$work/half.safetensors" --log "$work/d.csv" --clock wall --sample-len 0 --quiet --eval-every 0
clocks=$(awk -F, 'NR == 1 { h = $NF; next } { n++; if ($NF == ($1 < 10 ? "virtual" : "wall")) good++ }
    END { print h, n, good + 0 }' "$work/d.csv")
if [ "$status" -eq 0 ] && [ "$clocks" = "clock 20 20" ]; then
    ok "resumed with --clock wall: rows 0-9 say virtual, rows 10-19 wall"
else
    not_ok "resumed with --clock wall (exit $status): last header column, rows, rows of the right clock: $clocks"
fi
# A log written before the clock column (its header one column short) is
# continued too: its rows kept, their clock empty (unknown), none lost.
cut -d, -f1-9 "$work/a.csv" > "$work/e.csv"
tt 1 --resume "$work/half.safetensors" --log "$work/e.csv" --sample-len 0 --quiet --eval-every 0
cut -d, -f1-4 "$work/e.csv" > "$work/e4"
clocks=$(awk -F, 'NR == 1 { h = $NF; next } { n++; if (NF == 10 && $NF == ($1 < 10 ? "" : "virtual")) good++ }
    END { print h, n, good + 0 }' "$work/e.csv")
if [ "$status" -eq 0 ] && cmp -s "$work/full4" "$work/e4" && [ "$clocks" = "clock 20 20" ]; then
    ok "resumed onto a log without the clock column: rows 0-9 kept with an empty clock, 10-19 virtual"
else
    not_ok "resumed onto a log without the clock column (exit $status): last header column, rows, rows as expected: $clocks"
fi
# Resuming with another --steps redraws the learning-rate schedule (it is a
# cosine over --steps); the run says so with the rates, which are computed
# here from the formula (lab 5's answer to question 8): lr 0.003, floor
# 0.0003, warm-up 3, so from step 3 on lr(s, S) = 0.0003 + 0.0027 (1 + cos(pi
# (s - 3) / (S - 3))) / 2.
lr() { awk -v s="$1" -v S="$2" 'BEGIN { printf "%.4g", 0.0003 + 0.0027 * (1 + cos(3.141592653589793 * (s - 3) / (S - 3))) / 2 }'; }
# note_is NAME WANT ARGS...: a 1-rank run with ARGS exits 0 and prints the
# line WANT.
note_is() {
    name=$1 want=$2
    shift 2
    tt 1 "$@"
    if [ "$status" -eq 0 ] && grep -qxF "$want" "$work/out"; then ok "$name: $want"
    else not_ok "$name (exit $status): no line '$want'"; grep note "$work/out"; fi
}
note_is "resumed with --steps 30" \
    "note: the checkpoint's run had --steps 20; --steps 30 redraws the learning-rate schedule, so step 10 trains at lr $(lr 10 30) where that run's has $(lr 10 20) (to follow it, resume with --steps 20; --stop-at N ends a run early)" \
    --resume "$work/half.safetensors" --steps 30 --stop-at 11 --sample-len 0 --eval-every 0
# With --lr too, the saved run's rate is still its own (lr 0.003), not the
# new flag's; the new one is 0.0003 + 0.0297 (1 + cos(...)) / 2.
new=$(awk 'BEGIN { printf "%.4g", 0.0003 + 0.0297 * (1 + cos(3.141592653589793 * 7 / 27)) / 2 }')
note_is "resumed with --steps 30 --lr 0.03" \
    "note: the checkpoint's run had --steps 20; --steps 30 and the learning-rate flags given redraw the learning-rate schedule, so step 10 trains at lr $new where that run's has $(lr 10 20) (to follow it, resume with --steps 20 and without those flags; --stop-at N ends a run early)" \
    --resume "$work/half.safetensors" --steps 30 --lr 0.03 --stop-at 11 --sample-len 0 --eval-every 0
note_is "a finished run extended to 25 steps" \
    "note: the checkpoint's run had --steps 20 and ended at lr $(lr 19 20); --steps 25 draws the learning-rate schedule anew, so step 20 trains at lr $(lr 20 25)" \
    --resume "$work/full.safetensors" --steps 25 --stop-at 21 --sample-len 0 --eval-every 0
# A finished run that ended inside its warm-up (10 steps, the run 4) goes on
# up its ramp, lr 0.003 (s + 1) / 10: the note says so, not "anew"; extended
# to 7 steps, the run ends inside the warm-up, at step 6.
tt 1 $cfg --warmup 10 --steps 4 --save "$work/short.safetensors"
ramp() { awk -v s="$1" 'BEGIN { printf "%.4g", 0.003 * (s + 1) / 10 }'; }
for steps in 25 7; do
    [ $steps = 25 ] && last=9 || last=6
    note_is "a run ended in its warm-up, extended to $steps steps" \
        "note: the checkpoint's run had --steps 4 and ended in its warm-up at lr $(ramp 3); --steps $steps continues the warm-up to step $last, so step 4 trains at lr $(ramp 4)" \
        --resume "$work/short.safetensors" --steps $steps --stop-at 5 --sample-len 0 --eval-every 0
done
tt 1 --resume "$work/half.safetensors" --stop-at 11 --sample-len 0 --eval-every 0
if [ "$status" -eq 0 ] && ! grep -q '^note: the checkpoint' "$work/out"; then ok "resumed on its own schedule: no note"
else not_ok "resumed on its own schedule (exit $status): $(grep note "$work/out")"; fi

# The corpus belongs to the run: a checkpoint of a --data run, resumed
# without --data, goes on with that file (it once went on, unsaid, on the
# generated corpus), so its last loss is the one-run's.
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "line %d of a small book, read again and again.\n", i }' > "$work/book.txt"
tt 1 $cfg --data "$work/book.txt" --steps 4 --log "$work/book_full.csv"
tt 1 $cfg --data "$work/book.txt" --steps 4 --stop-at 2 --save "$work/book.safetensors"
tt 1 --resume "$work/book.safetensors" --log "$work/book_b.csv" --sample-len 0 --quiet --eval-every 0
if [ "$status" -eq 0 ] && grep -q "^data: $work/book.txt (the checkpoint's --data);" "$work/out" &&
   [ "$(tail -n 1 "$work/book_b.csv" | cut -d, -f1,2)" = "$(tail -n 1 "$work/book_full.csv" | cut -d, -f1,2)" ]; then
    ok "resumed without --data: trains on the checkpoint's --data file, as one run does"
else
    not_ok "resumed without --data (exit $status): $(grep '^data:' "$work/out"); $(tail -n 1 "$work/book_b.csv") against $(tail -n 1 "$work/book_full.csv")"
fi

# Another corpus given now is taken, and said; a checkpoint from before the
# record (its "data" key removed, the header rewritten) is said to be silent.
awk 'BEGIN { for (i = 0; i < 3000; i++) printf "another line %d, of another book.\n", i }' > "$work/book2.txt"
tt 1 --resume "$work/book.safetensors" --stop-at 3 --sample-len 0 --quiet --eval-every 0 --data "$work/book2.txt"
if [ "$status" -eq 0 ] && grep -qx "note: checkpoint '$work/book.safetensors' trained on '$work/book.txt'; this run trains on '$work/book2.txt'" "$work/out"; then
    ok "resumed on another --data: a note names both files"
else
    not_ok "resumed on another --data (exit $status): $(grep '^note' "$work/out")"
fi
# The same name, other bytes: the checkpoint's size and CRC-32 of the file tell.
cp "$work/book.txt" "$work/book.orig"
echo "one more line" >> "$work/book.txt"
tt 1 --resume "$work/book.safetensors" --stop-at 3 --sample-len 0 --quiet --eval-every 0
mv "$work/book.orig" "$work/book.txt"
if [ "$status" -eq 0 ] && grep -q "^note: '$work/book.txt' is not the file checkpoint '$work/book.safetensors' trained on: [0-9]* bytes of CRC-32 [0-9a-f]\{8\} then, [0-9]* of [0-9a-f]\{8\} now$" "$work/out"; then
    ok "resumed on a changed --data file: a note gives its size and CRC-32 then and now"
else
    not_ok "resumed on a changed --data file (exit $status): $(grep '^note' "$work/out")"
fi
# The path is stored as given: a relative one resumed from another directory
# is not found, and the error says where it was relative to.
mkdir -p "$work/dir"
cp "$work/book.txt" "$work/dir/book.txt"
cd "$work/dir"
tt 1 $cfg --data book.txt --steps 4 --stop-at 2 --save "$work/rel.safetensors"
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
expect_error "a relative --data resumed from another directory" 1 "^tiny_transformer: cannot read data file 'book.txt': .* (the --data of checkpoint '$work/rel.safetensors', relative to the directory its run was started in; give --data FILE)$" 1 --resume "$work/rel.safetensors" --sample-len 0
cd "$work"
python3 - "$work/book.safetensors" "$work/nodata.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
for key in ("data", "data_bytes", "data_crc32"):
    del head["__metadata__"][key]
text = json.dumps(head, separators=(",", ":")).encode()
text += b" " * (-(8 + len(text)) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
tt 1 --resume "$work/nodata.safetensors" --stop-at 3 --sample-len 0 --quiet --eval-every 0
if [ "$status" -eq 0 ] && grep -qx "note: checkpoint '$work/nodata.safetensors' does not say which data it trained on (it is older than that record); this run trains on the generated corpus (give --data FILE if it trained on a file)" "$work/out"; then
    ok "a checkpoint without the data record: a note says the run cannot tell"
else
    not_ok "a checkpoint without the data record (exit $status): $(grep '^note' "$work/out"; head -n 3 "$work/err")"
fi

finish
