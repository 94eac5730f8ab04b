#!/bin/sh
# tests/test_train.sh - the program learns: on the generated corpus the loss
# falls far below its starting value ln(256) = 5.55 and the held-out loss
# follows; --data trains on a file; the CSV log has its documented columns.
. "$TT_SRCDIR/testlib.sh"

tt 1 --layers 2 --dim 64 --heads 4 --seq 32 --batch 8 --steps 120 --lr 5e-3 --warmup 10 \
    --eval-every 60 --log "$work/log.csv" --sample-len 40
if [ "$status" -ne 0 ]; then
    not_ok "training run exited $status"
else
    first=$(sed -n 2p "$work/log.csv" | cut -d, -f2)
    last=$(tail -n 1 "$work/log.csv" | cut -d, -f2)
    ev=$(sed -n 's/.*eval loss \([0-9.]*\).*/\1/p' "$work/out")
    echo "loss $first -> $last, eval $ev"
    awk -v f="$first" 'BEGIN { exit !(f > 5.3 && f < 5.8) }' && ok "first loss near ln(256): $first" || not_ok "first loss $first"
    awk -v l="$last" 'BEGIN { exit !(l < 2.6) }' && ok "loss fell below 2.6: $last" || not_ok "final loss $last"
    awk -v e="$ev" 'BEGIN { exit !(e != "" && e < 2.8) }' && ok "eval loss below 2.8: $ev" || not_ok "eval loss '$ev'"
    head -n 1 "$work/log.csv" | grep -q '^step,loss,lr,grad_norm,' && ok "CSV header" || not_ok "CSV header"
    [ "$(wc -l < "$work/log.csv")" -eq 121 ] && ok "one CSV row per step" || not_ok "CSV rows"
    grep -q '^sample: "The cat ' "$work/out" && ok "sample printed" || not_ok "no sample"
    # Without --verbose about ten step lines: the first, the last, every
    # tenth of the run (120 / 10 = 12: steps 11, 23, ..., 119) and each eval
    # (59 and 119, already among them).
    shown=$(sed -n 's/^step *\([0-9]*\)\/120 .*/\1/p' "$work/out" | tr '\n' ' ')
    [ "$shown" = "0 11 23 35 47 59 71 83 95 107 119 " ] && ok "compact progress: step lines $shown" || not_ok "step lines shown: '$shown'"
    grep -q '^a step line every 12 steps (--verbose: every step' "$work/out" && ok "says how often it prints" || not_ok "no note on the step lines"
    ! grep -q "$(printf '\r')" "$work/out" && ok "no updating line when the output is not a terminal" || not_ok "carriage return in a file"
fi

# On a terminal, without mpirun (whose ranks always write into a pseudo-
# terminal, so it cannot tell), every step is drawn over the one before (\r)
# and the same ten or so lines as above stay: 30 steps, one line every 3.
if command -v script >/dev/null 2>&1; then
    script -qc "\"$TT_BIN\" --layers 1 --dim 32 --heads 2 --seq 16 --batch 4 --steps 30 --sample-len 0 --eval-every 0" /dev/null > "$work/tty" 2>&1
    drawn=$(tr '\r' '\n' < "$work/tty" | grep -c '^step ')
    kept=$(sed 's/\r$//' "$work/tty" | awk -F'\r' '{ print $NF }' | sed -n 's/^step *\([0-9]*\)\/30 .*/\1/p' | tr '\n' ' ')
    if [ "$drawn" -eq 30 ] && [ "$kept" = "0 2 5 8 11 14 17 20 23 26 29 " ]; then
        ok "terminal: all 30 steps drawn on one updating line, steps $kept kept"
    else
        not_ok "terminal: $drawn steps drawn, kept '$kept'"
    fi
fi

# --data: a file of repeated text is learned quickly.
i=0
while [ $i -lt 300 ]; do printf 'abcdefghij'; i=$((i + 1)); done > "$work/abc.txt"
tt 1 --data "$work/abc.txt" --layers 1 --dim 32 --heads 2 --seq 16 --batch 4 --steps 60 --lr 1e-2 --warmup 5 --sample-len 20 --prompt abc --verbose
if [ "$status" -eq 0 ] && grep -q '^sample: "abcdefghijabcdefghijabc"' "$work/out"; then
    ok "--data: learned the repeating file"
else
    not_ok "--data run"
fi
[ "$(grep -c '^step ' "$work/out")" -eq 60 ] && ok "--verbose: one line per step" || not_ok "--verbose step lines"
finish
