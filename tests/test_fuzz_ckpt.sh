#!/bin/sh
# tests/test_fuzz_ckpt.sh - checkpoint fuzzing (issue 13, doc/design.md section 7):
# a few hundred mutants of one valid checkpoint (truncations, changed bytes
# in the header and the data, the header length, shapes, data offsets,
# dtypes, checksums, metadata values and the header's structure, plus
# rewrites that leave a valid file), each resumed on 1 rank and a share of
# them on pp 2 and on tp 2 x pp 2, every run under a 10 s timeout.
# tests/fuzz_ckpt.py makes the mutants and judges the runs: never a crash or
# a hang, every rank the same exit status (0, 1 or 2), one message for a
# refusal, a refusal wherever a check must see the damage (always for a
# changed data byte: the per-tensor CRC-32 covers it), acceptance of the
# valid rewrites, and the same loss on every layout that accepts a mutant.
#
# The checker is tested first with planted faults: the unmodified file
# presented as damage that must be refused, and stand-in programs that
# crash, hang, or whose ranks disagree; each must make it report failure.
#
# The mutants follow from the fixed seed; the counts by kind and outcome are
# printed at the end. Exit status: 0 pass, 1 failure, 77 skipped (no python3).
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found: skipping the checkpoint fuzzer"
    exit 77
fi
fuzz="python3 $TT_SRCDIR/fuzz_ckpt.py"

# The base: a tiny model (a run costs MPI's start-up, not training) saved
# at step 3; the mutants resume it for one step (--steps 4).
tt 1 --layers 2 --dim 16 --heads 2 --seq 8 --batch 4 --micro-batches 2 --steps 3 \
    --eval-every 0 --quiet --sample-len 0 --save "$work/base.st"
if [ "$status" -ne 0 ] || [ ! -s "$work/base.st" ]; then
    not_ok "the base checkpoint: exit $status"
    finish
fi
ok "the base checkpoint: $(wc -c < "$work/base.st") bytes at step 3"

# ---- the checker, with planted faults ----------------------------------------

# planted WHAT PATTERN ARGS...: the fuzzer run with ARGS must fail and say PATTERN.
planted() {
    what=$1 pattern=$2
    shift 2
    $fuzz "$work/base.st" "$work/planted" "$@" >"$work/out" 2>"$work/err"
    s=$?
    rm -rf "$work/planted"
    if [ "$s" -ne 1 ]; then
        not_ok "planted fault, $what: the checker exited $s, expected 1"
    elif ! grep -q -- "$pattern" "$work/out"; then
        not_ok "planted fault, $what: the checker does not say '$pattern'"
    else
        ok "planted fault, $what: $(grep -m 1 -- "$pattern" "$work/out" | cut -c 1-150)"
    fi
}
planted "the good file as a must-refuse mutant" "PLANTED.*must be refused" \
    --plant good-as-bad --limit 1 --pp-every 0 --tp-every 0

# Stand-in programs: $FAKE says how they misbehave.
cat > "$work/fake" <<'EOF'
#!/bin/sh
case $FAKE in
    crash) kill -s SEGV $$ ;;
    hang) exec sleep 30 ;;
    disagree)
        if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 0 ]; then
            echo "trained steps 3..3 in 0.0 s: loss 1 -> 1"
            exit 0
        fi
        echo "tiny_transformer: refused on this rank only" >&2
        exit 1 ;;
esac
EOF
chmod +x "$work/fake"
FAKE=crash TT_BIN="$work/fake" planted "a crashing program" "PROBLEM.*\(crash report\|rank exit statuses\)" \
    --limit 1 --pp-every 0 --tp-every 0
FAKE=hang TT_BIN="$work/fake" planted "a hanging program" "no end within the timeout" \
    --limit 1 --pp-every 0 --tp-every 0 --timeout 2
FAKE=disagree TT_BIN="$work/fake" planted "ranks that disagree" "ranks ended differently" \
    --limit 1 --pp-every 1 --tp-every 0

# ---- the fuzzing -------------------------------------------------------------

start=$(date +%s)
$fuzz "$work/base.st" "$work/mutants" --seed 13 --timeout 10 >"$work/out" 2>"$work/err"
s=$?
cat "$work/out"
secs=$(( $(date +%s) - start ))
if [ "$s" -eq 0 ] && grep -q "^0 problems" "$work/out"; then
    ok "$(grep ' mutants, ' "$work/out") ($secs s)"
else
    not_ok "the fuzzer found problems (exit $s): see PROBLEM lines above"
fi
finish
