#!/bin/sh
# tests/test_cli.sh - bad input gets one clear line from rank 0 and a non-zero
# exit, never a crash or a hang, and never damages an existing file.
. "$TT_SRCDIR/testlib.sh"

small="--layers 1 --dim 16 --heads 2 --seq 16 --batch 2 --micro-batches 1 --sample-len 0 --quiet --eval-every 0"

tt 1 --help
if [ "$status" -eq 0 ] && grep -q -- "--resume FILE" "$work/out"; then ok "--help"; else not_ok "--help"; fi
tt 1 --version
if [ "$status" -eq 0 ] && grep -q "^tiny_transformer [0-9]" "$work/out"; then ok "--version"; else not_ok "--version"; fi

# Without mpirun, --help and --version answer before MPI starts (a singleton's
# start can take a minute on a loaded machine). An unknown point-to-point
# layer makes Open MPI's start fail: the answers must not notice, while a run
# that does start MPI (--show-grid) must fail with it, or the check proves
# nothing (another MPI that ignores the variable: not checked).
OMPI_MCA_pml=no_such_layer timeout 60 "$TT_BIN" --show-grid >"$work/out" 2>&1
if [ $? -ne 0 ]; then
    for answer in --help --version; do
        OMPI_MCA_pml=no_such_layer timeout 60 "$TT_BIN" $answer >"$work/alone" 2>"$work/err"
        alone=$?
        tt 1 $answer
        if [ "$alone" -eq 0 ] && [ "$status" -eq 0 ] && [ -s "$work/alone" ] && cmp -s "$work/alone" "$work/out"; then
            ok "$answer without mpirun answers before MPI starts, as under mpirun"
        else
            not_ok "$answer without mpirun (status $alone) needs MPI, or differs from mpirun's (status $status)"
        fi
    done
else
    echo "# this MPI ignores OMPI_MCA_pml: answering without MPI not checked"
fi

# Started by another MPI's launcher, each process would find MPI_COMM_WORLD
# of size 1 and train alone, all of them writing the same files: the first
# says so once, naming the launcher, the MPI it was built with and the mpirun
# configure found, and all exit 2 before any work (the others after 3 s, so
# that Open MPI's mpirun, which ends the job at the first non-zero exit,
# lets the first one say it). Faked by a launcher's variables around a singleton
# (Open MPI's, then Hydra's and Slurm's), then for real when the other MPI's
# launcher is installed.
for vars in "OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0:Open MPI's mpirun started 3" \
    "PMI_SIZE=2 PMI_RANK=0:a PMI launcher (MPICH's mpirun, Slurm) started 2" "PMI_SIZE=2 PMI_RANK=1:"; do
    # shellcheck disable=SC2086
    env ${vars%%:*} timeout 60 "$TT_BIN" $small --steps 1 --save "$work/alone.st" >"$work/out" 2>"$work/err"
    alone=$?
    said=${vars#*:}
    if [ "$alone" -eq 2 ] && [ ! -e "$work/alone.st" ] && ! grep -q "^step" "$work/out" &&
        if [ -n "$said" ]; then
            [ "$(grep -c . "$work/err")" -eq 1 ] &&
                grep -q "^tiny_transformer: $said processes, but MPI gives this one a world of 1: the program was built with .*, and each process would train alone. Launch it with the mpirun of the MPI it was built with, .* (--help says which flags it needs)$" "$work/err"
        else
            [ ! -s "$work/err" ]
        fi; then
        how="one line"
        [ -n "$said" ] || how="silent (not the first)"
        ok "${vars%%:*}: another launcher's process refuses, exit 2, $how"
    else
        not_ok "${vars%%:*}: exit $alone; $(head -c 300 "$work/err")"
    fi
done
case $TT_MPI_FLAVOUR in openmpi) other=mpirun.mpich ;; *) other=mpirun.openmpi ;; esac
if command -v "$other" >/dev/null 2>&1; then
    extra=""
    [ "$other" = mpirun.openmpi ] && extra="--oversubscribe"
    [ "$other" = mpirun.openmpi ] && [ "$(id -u)" = 0 ] && extra="$extra --allow-run-as-root"
    # shellcheck disable=SC2086
    timeout 120 "$other" $extra -np 2 "$TT_BIN" $small --steps 1 >"$work/out" 2>"$work/err"
    alone=$?
    if [ "$alone" -eq 2 ] && [ "$(grep -c "^tiny_transformer: .* started 2 processes, but MPI gives this one a world of 1" "$work/err")" -eq 1 ] &&
        ! grep -q "^step" "$work/out"; then
        ok "$other -np 2 on a build of the other MPI: $(grep '^tiny_transformer' "$work/err" | cut -c1-90)..."
    else
        not_ok "$other -np 2 on a build of the other MPI: exit $alone"
    fi
else
    echo "# $other is not installed: a real launch by the other MPI not checked"
fi

# What a user sees from mpirun: the ranks' status (first the plain launcher).
tt 2 --frobnicate
[ "$status" -eq 2 ] && ok "mpirun exits 2 on a usage error" || not_ok "mpirun exit status $status on a usage error"
tt 1 --data "$work/nope.txt"
[ "$status" -eq 1 ] && ok "mpirun exits 1 on a runtime error" || not_ok "mpirun exit status $status on a runtime error"

expect_error "a flag's value is not --help" 2 "option --steps needs a value, but the next argument is the option --help" 1 --steps --help
expect_error "a forgotten value is not the next option" 2 "option --log needs a value, but the next argument is the option --quiet " 1 $small --log --quiet
expect_error "unknown flag" 2 "unknown option '--frobnicate'" 1 --frobnicate 3
expect_error "bad number" 2 "--lr expects a number, got 'fast'" 1 --lr fast
expect_error "bad integer" 2 "--layers expects an integer, got '2x'" 1 --layers 2x
expect_error "out of range" 2 "--steps must be between" 1 --steps -4
expect_error "missing value" 2 "option --seq needs a value" 1 --seq
expect_error "heads do not divide dim" 2 "--heads 5 must divide --dim 16" 1 $small --heads 5
expect_error "micro-batches" 2 "--micro-batches 3 must divide --batch 2" 1 $small --micro-batches 3

# Layouts that cannot work: refused before any work, with every rule broken,
# the mpirun line when more ranks would do, and a table of the layouts that do
# work. The expected tables follow from the rules for $small (1 block, 2 heads,
# batch 2, one micro-batch): tp divides 2 heads, pp is 1, dp divides the batch.
# expect_layout NAME NP EXPECTED ARGS...: every rank exits 2 and stderr is
# exactly EXPECTED (so rank 0 alone spoke, once).
expect_layout() {
    what=$1 np=$2 want=$3
    shift 3
    tt_each "$np" "$@"
    statuses=$(rank_statuses)
    printf '%s\n' "$want" > "$work/want"
    if [ "$statuses" != "${np}x2" ]; then
        not_ok "$what: rank exit statuses $statuses, expected ${np}x2"
    elif ! cmp -s "$work/want" "$work/err"; then
        not_ok "$what: stderr is not the expected message"; diff "$work/want" "$work/err"
    else
        ok "$what: $(head -n 1 "$work/err")"
    fi
}
expect_layout "tp x pp x dp > world: the mpirun line" 2 "tiny_transformer: bad layout: tp 2 x pp 1 x dp 2 = 4 GPUs, but only 2 ranks were started.
Start 4 ranks, one per virtual GPU:
  mpirun --oversubscribe -np 4 ./tiny_transformer $small --tp 2 --pp 1 --dp 2
Layouts that work on 2 ranks:
  tp pp dp    tp pp dp
   1  1  2     2  1  1" $small --tp 2 --pp 1 --dp 2
# A long command line, repeated in both mpirun lines, still leaves the table
# whole (the message was once cut at 512 bytes, mid-table). The default
# model (12 heads, 6 blocks, batch 24) with one micro-batch takes every
# tp x pp x dp = 6: tp 1, 2, 3 or 6 divides the heads, pp up to 6 blocks, dp
# divides the batch.
long=$(printf '%90s' '' | tr ' ' p)
expect_layout "a long command line: the table is whole" 6 "tiny_transformer: bad layout: --dp 4 needs a multiple of 4 ranks, but 6 ranks were started.
Start 4 or 8 ranks, one per virtual GPU:
  mpirun --oversubscribe -np 4 ./tiny_transformer --dp 4 --micro-batches 1 --prompt $long
  mpirun --oversubscribe -np 8 ./tiny_transformer --dp 4 --micro-batches 1 --prompt $long
Layouts that work on 6 ranks:
  tp pp dp    tp pp dp    tp pp dp    tp pp dp
   1  1  6     1  2  3     1  3  2     1  6  1
   2  1  3     2  3  1     3  1  2     3  2  1
   6  1  1" --dp 4 --micro-batches 1 --prompt "$long"
expect_layout "a size that cannot divide the ranks, and breaks a rule" 2 "tiny_transformer: bad layout: --dp 3 needs a multiple of 3 ranks, but only 2 ranks were started; dp 3 must divide --batch 2 (each DP rank takes batch/dp sequences).
Layouts that work on 2 ranks:
  tp pp dp    tp pp dp
   1  1  2     2  1  1" $small --dp 3
expect_layout "every rule a size breaks" 4 "tiny_transformer: bad layout: --tp 3 needs a multiple of 3 ranks, but 4 ranks were started; tp 3 must divide --heads 2 (each TP rank owns whole heads).
Layouts that work on 4 ranks:
  tp pp dp    tp pp dp
   1  1  4     2  1  2" $small --batch 4 --tp 3
expect_layout "a size of 0" 4 "tiny_transformer: bad layout: --dp 0: every size must be at least 1.
Layouts that work on 4 ranks:
  tp pp dp    tp pp dp
   1  1  4     2  1  2" $small --batch 4 --dp 0
# Started without mpirun: one rank, and the line that starts enough.
"$TT_BIN" $small --tp 2 >"$work/out" 2>"$work/err"
status=$?
printf '%s\n' "tiny_transformer: bad layout: --tp 2 needs a multiple of 2 ranks, but only 1 rank was started." \
    "Start 2 ranks, one per virtual GPU:" "  mpirun --oversubscribe -np 2 ./tiny_transformer $small --tp 2" \
    "On 1 rank the only layout is tp 1 pp 1 dp 1." > "$work/want"
if [ "$status" -eq 2 ] && cmp -s "$work/want" "$work/err"; then
    ok "--tp 2 without mpirun: the mpirun line"
else
    not_ok "--tp 2 without mpirun (status $status)"; diff "$work/want" "$work/err"
fi
expect_error "batch not divisible by dp" 2 "no layout works on 3 ranks for this model and batch; e.g. tp 1 pp 1 dp 3: dp 3 must divide --batch 2" 3 $small
expect_layout "micro-batches per replica" 4 "tiny_transformer: bad layout: no layout with --dp 4 works on 4 ranks for this model and batch; e.g. tp 1 pp 1 dp 4: --micro-batches 2 must divide batch/dp = 4/4 = 1 (with dp 4: --micro-batches 1).
Layouts that work on 4 ranks:
  tp pp dp
   2  1  2" $small --batch 4 --dp 4 --micro-batches 2
expect_layout "a pipeline stage without a block" 2 "tiny_transformer: bad layout: pp 2 exceeds --layers 1 (every pipeline stage needs a block).
Layouts that work on 2 ranks:
  tp pp dp    tp pp dp
   1  1  2     2  1  1" $small --pp 2
# zb-v runs two chunks per stage: the numbers that make pp 2 too many for 2
# blocks (2 x 2 = 4 chunks), and the --layers that would do; and no layout of
# 2 ranks works: pp 2 needs 4 blocks, and zb-v refuses one stage (the table
# once offered tp 2 and dp 2 on one stage, which the run then refused).
expect_layout "virtual stages: the chunk count in numbers" 2 "tiny_transformer: bad layout: pp 2 x 2 chunks per stage (virtual stages) = 4 exceeds --layers 2 (every chunk needs a block; --layers 4 would allow pp 2).
No layout works on 2 ranks for this model and batch." $small --layers 2 --pp 2 --schedule zb-v
# --virtual-stages that the schedule refuses whatever the layout (1f1b runs
# one chunk per stage): said before the layout's rule on chunks, which
# counted the 3 chunks anyway and proposed "--layers 6 would allow pp 2",
# after which the same command was refused for the schedule.
expect_error "--virtual-stages 3 with 1f1b, pp 2" 2 "^tiny_transformer: pipeline schedule 1f1b runs one chunk per stage (got v = 3)" 2 $small --layers 4 --pp 2 --virtual-stages 3
expect_error "--virtual-stages 3 with 1f1b, pp 1" 2 "^tiny_transformer: pipeline schedule 1f1b runs one chunk per stage (got v = 3)" 1 $small --layers 2 --virtual-stages 3
expect_error "--virtual-stages 3 with zb-v" 2 "^tiny_transformer: the zb-v schedule runs exactly 2 chunks per stage (got v = 3)" 2 $small --layers 4 --pp 2 --schedule zb-v --virtual-stages 3
# tp 2 on 5 ranks: 4 (tp 2 dp 2) and 6 (tp 2 dp 3) both split --batch 6 and
# are the nearest; no layout of 5 ranks works (dp 5 does not divide 6, one
# block allows pp 1 only, tp 5 does not divide 2 heads), so no table.
expect_layout "tp 2 on 5 ranks: the nearest counts that work" 5 "tiny_transformer: bad layout: --tp 2 needs a multiple of 2 ranks, but 5 ranks were started.
Start 4 or 6 ranks, one per virtual GPU:
  mpirun --oversubscribe -np 4 ./tiny_transformer $small --batch 6 --tp 2
  mpirun --oversubscribe -np 6 ./tiny_transformer $small --batch 6 --tp 2" $small --batch 6 --tp 2
# Sizes not given are chosen among the layouts the run would take, not only
# those the sizes' own rules allow (the flags checked once the layout is
# known). Without such flags 2 ranks get pp 2 and 4 get tp 1 pp 2 dp 2 (the
# preference: more sizes above 1, then the smaller tp, then the larger pp).
# --zero needs dp > 1: dp 2. --sequence-parallel needs tp > 1: tp 2 pp 2
# beats tp 2 dp 2 by its larger pp. zb-h1 with one micro-batch needs
# pp <= 1: of tp 2 dp 4 and tp 4 dp 2 (tp 8 does not divide 12 heads),
# the smaller tp.
while IFS='|' read -r what np args want <&3; do
    tt "$np" --show-grid $args
    if [ "$status" -eq 0 ] && head -n 1 "$work/out" | grep -q "^virtual GPU grid: $want = $np GPUs"; then
        ok "chosen for $what: $want"
    else
        not_ok "chosen for $what (exit $status): $(head -n 1 "$work/out"), want $want"
    fi
done 3<<'T'
no flags, 2 ranks|2||tp 1 x pp 2 x dp 1
--zero 1, 2 ranks|2|--zero 1|tp 1 x pp 1 x dp 2
no flags, 4 ranks|4||tp 1 x pp 2 x dp 2
--sequence-parallel, 4 ranks|4|--sequence-parallel|tp 2 x pp 2 x dp 1
zb-h1 with one micro-batch, 8 ranks|8|--schedule zb-h1 --micro-batches 1|tp 2 x pp 1 x dp 4
T
# When no layout of the ranks takes the flag, the run says why, as before.
expect_error "--zero 1 on one rank: no layout takes it" 2 "^tiny_transformer: --zero 1 needs a data-parallel group" 1 $small --zero 1

# --stop-at past the end would be ignored; at the end it is the whole run.
expect_error "--stop-at past --steps" 2 "^tiny_transformer: --stop-at 5 is past --steps 3 " 1 $small --steps 3 --stop-at 5
expect_error "--stop-at with --steps 0" 2 "^tiny_transformer: --stop-at 5 with --steps 0: a run of no steps has nothing to stop; drop --stop-at" 1 $small --steps 0 --stop-at 5
expect_error "--stop-at past one step: singular" 2 "once its 1 step is done;" 1 $small --steps 1 --stop-at 2
# ZeRO's collectives go a unit at a time: the bucket size and the overlap
# switch of ZeRO 0's all-reduce would change nothing, so they are refused.
expect_error "--no-overlap under ZeRO" 2 "^tiny_transformer: --no-overlap applies to --zero 0's all-reduce buckets; --zero 1's collectives are blocking" 2 $small --dp 2 --zero 1 --no-overlap
# --dp-bucket in bytes: a number meant as MB makes thousands of all-reduces,
# and the banner says so past 1000. The model below has 11760 floats, by
# hand: tok_emb and lm_head 256 x 16 each, pos_emb 16 x 16, ln_f 32, one
# block 32 + 768 + 48 + 272 + 32 + 1088 + 1040 = 3280 (LayerNorms; q, k, v
# weights and biases; proj; fc1; fc2). A 4-byte bucket holds one float: 11760
# all-reduces; 48 bytes hold 12: 980, under the threshold, no note.
tiny="--layers 1 --dim 16 --heads 2 --seq 16 --batch 2 --micro-batches 1 --sample-len 0 --eval-every 0 --steps 0"
tt 2 $tiny --dp 2 --dp-bucket 4
if [ "$status" -eq 0 ] && grep -q "^note: a --dp-bucket of 4 bytes makes 11760 all-reduces a step" "$work/out"; then
    tt 2 $tiny --dp 2 --dp-bucket 48
    if [ "$status" -eq 0 ] && grep -q " in 980 all-reduce buckets" "$work/out" && ! grep -q "^note: a --dp-bucket" "$work/out"; then
        ok "--dp-bucket 4: a note counts 11760 all-reduces; 48 bytes make 980 and no note"
    else
        not_ok "--dp-bucket 48 (exit $status): $(grep -i 'bucket' "$work/out")"
    fi
else
    not_ok "--dp-bucket 4 (exit $status): $(grep -i 'bucket' "$work/out")"
fi
# --steps 0 says so in its one closing line.
tt 1 $tiny
if [ "$status" -eq 0 ] && grep -q "^no steps to train (--steps 0); eval loss" "$work/out" && [ "$(grep -c 'no .*steps' "$work/out")" -eq 1 ]; then
    ok "--steps 0: one line says there are no steps, and why"
else
    not_ok "--steps 0 (exit $status): $(grep 'steps' "$work/out")"
fi
expect_error "--dp-bucket under ZeRO" 2 "^tiny_transformer: --dp-bucket sizes --zero 0's all-reduce buckets; --zero 3's collectives go a unit" 2 $small --dp 2 --zero 3 --dp-bucket 4M
# A stop before the end without --save keeps nothing to resume: said.
tt 1 $small --steps 4 --stop-at 2 --sample-len 0
if [ "$status" -eq 0 ] && grep -qx "note: --stop-at 2 without --save: the run stops before step 2 and keeps no checkpoint to continue from" "$work/out"; then
    ok "--stop-at without --save: a note says nothing is kept"
else
    not_ok "--stop-at without --save (status $status): $(grep note "$work/out")"
fi
tt 1 $small --steps 2 --stop-at 2 --log "$work/stop.csv"
if [ "$status" -eq 0 ] && [ "$(grep -c '^[0-9]' "$work/stop.csv")" -eq 2 ]; then
    ok "--stop-at equal to --steps runs every step"
else
    not_ok "--stop-at equal to --steps (status $status)"
fi
expect_error "--stage-layers leaving a stage empty" 2 "chunk 1 would have 0 blocks" 2 $small --layers 2 --pp 2 --stage-layers 2,0
expect_error "--stage-layers not adding up" 2 "adds up to 3 blocks, --layers is 2" 2 $small --layers 2 --pp 2 --stage-layers 1,2
expect_error "--stage-layers of another length" 2 "lists more than the 2 chunks of this layout" 2 $small --layers 3 --pp 2 --stage-layers 1,1,1
expect_error "--stage-layers too short" 2 "lists 1 chunk(s), the layout has 2" 2 $small --layers 3 --pp 2 --stage-layers 3
expect_error "--stage-layers with a trailing comma" 2 "expects numbers separated by commas, got '1,1,'" 2 $small --layers 2 --pp 2 --stage-layers 1,1,
expect_error "--quiet with --verbose" 2 "^tiny_transformer: --quiet (no step lines) and --verbose (every step line) contradict each other: give one" 1 --quiet --verbose --steps 1
expect_error "--inject-bug no-zero-grad on one step" 2 "^tiny_transformer: --inject-bug no-zero-grad needs a run that trains 2 steps or more (a run's first step starts from zeroed gradients); this run trains 1$" 1 $small --steps 1 --inject-bug no-zero-grad
expect_error "--inject-bug stall on one GPU" 2 "^tiny_transformer: --inject-bug stall needs 2 GPUs and a run that trains step 1 .*; this run has 1 GPU and trains steps 0..2$" 1 $small --steps 3 --inject-bug stall
expect_error "--inject-bug stall for one step" 2 "this run has 2 GPUs and trains steps 0..0$" 2 $small --steps 1 --dp 2 --inject-bug stall
expect_error "unknown schedule" 2 "--schedule expects naive, gpipe, 1f1b, interleaved, zb-h1 or zb-v, got 'zigzag'" 1 $small --schedule zigzag
expect_error "missing data file" 1 "cannot read data file '$work/nope.txt'" 1 $small --data "$work/nope.txt"
printf 'short text' > "$work/short.txt"
expect_error "data shorter than a window" 1 "has 10 bytes; with --seq 16 it needs at least" 1 $small --data "$work/short.txt"

# A good checkpoint, then each way a checkpoint can be bad.
tt 1 $small --steps 0 --save "$work/good.safetensors"
if [ "$status" -eq 0 ] && [ -s "$work/good.safetensors" ]; then ok "--steps 0 --save"; else not_ok "--steps 0 --save"; fi
cp "$work/good.safetensors" "$work/keep.safetensors"
# A checkpoint at its run's end trains nothing, and says how to go on.
tt 1 --resume "$work/good.safetensors" --sample-len 0
if [ "$status" -eq 0 ] && grep -q "^no steps to train (already at step 0, the run's end; --steps N trains on to step N)" "$work/out"; then
    ok "a finished checkpoint resumed: the line says --steps N trains on"
else
    not_ok "a finished checkpoint resumed (status $status): $(grep 'no steps' "$work/out")"
fi
# Resumed, --steps is the checkpoint's (0 here), and the message says so.
expect_error "--stop-at past a checkpoint's --steps" 2 "^tiny_transformer: --stop-at 5 is past --steps 0 of the checkpoint " 1 --resume "$work/good.safetensors" --stop-at 5
# --stop-at not past a checkpoint's step: nothing to train, and the line
# that says so names the flag (a stop at or before the checkpoint).
tt 1 $small --steps 4 --stop-at 2 --save "$work/at2.safetensors"
tt 1 --resume "$work/at2.safetensors" --stop-at 1 --sample-len 0
if [ "$status" -eq 0 ] && grep -q "^no training steps in this run (at step 2 of 4; --stop-at 1 is not past it)$" "$work/out"; then
    ok "--stop-at before the checkpoint's step: no steps, and the line names --stop-at"
else
    not_ok "--stop-at before the checkpoint's step (status $status)"
fi
expect_error "--inject-bug stall resumed past step 1" 2 "^tiny_transformer: --inject-bug stall needs 2 GPUs and a run that trains step 1 .*; this run has 2 GPUs and trains steps 2..3$" 2 --resume "$work/at2.safetensors" --dp 2 --sample-len 0 --inject-bug stall
# A fault that acts at any step still acts in a resumed run (only the
# stall's step 1 can be missed): nan-grad stops it at its first step.
expect_error "--inject-bug nan-grad resumed at step 2" 1 "^tiny_transformer: the gradient norm became nan at step 2 (some gradient is inf or NaN; the first step from checkpoint '$work/at2.safetensors', whose weights may be the cause; or try a lower --lr)$" 2 --resume "$work/at2.safetensors" --dp 2 --sample-len 0 --inject-bug nan-grad
expect_error "missing checkpoint" 1 "cannot open checkpoint '$work/none.safetensors': No such file or directory" 1 $small --resume "$work/none.safetensors"
size=$(wc -c < "$work/good.safetensors")
head -c $((size / 2)) "$work/good.safetensors" > "$work/trunc.safetensors"
expect_error "truncated checkpoint" 1 "trunc.safetensors' is truncated: tensor" 1 $small --resume "$work/trunc.safetensors"
head -c 5 "$work/good.safetensors" > "$work/tiny.safetensors"
expect_error "5-byte checkpoint" 1 "tiny.safetensors' is truncated: 5 bytes, too short for the 8-byte header length" 1 $small --resume "$work/tiny.safetensors"
cp "$work/good.safetensors" "$work/flip.safetensors"
printf '\377\377\377\377' | dd of="$work/flip.safetensors" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
expect_error "corrupted checkpoint data" 1 "checksum" 1 $small --resume "$work/flip.safetensors"
cp "$work/good.safetensors" "$work/hdr.safetensors"
printf 'XX' | dd of="$work/hdr.safetensors" bs=1 seek=8 conv=notrunc 2>/dev/null
expect_error "corrupted checkpoint header" 1 "hdr.safetensors' has a corrupt header: not valid JSON" 1 $small --resume "$work/hdr.safetensors"
# Bytes after the last tensor's data: safetensors' readers refuse such a file
# (the data must end the file); it was resumed from as if they were not there.
{ cat "$work/good.safetensors"; printf 'junk'; } > "$work/appended.safetensors"
expect_error "checkpoint with bytes appended" 1 "appended.safetensors' has 4 bytes after the data of its tensors" 1 $small --resume "$work/appended.safetensors"
expect_error "checkpoint of another model size" 1 "--dim 16, but --dim 32 was given" 1 $small --dim 32 --resume "$work/good.safetensors"
tt 1 $small --steps 2 --save "$work/two.safetensors"
expect_error "--steps below the checkpoint's step" 1 "below the checkpoint's step 2" 1 $small --steps 1 --resume "$work/two.safetensors"

# A run refused before its first step touches no output: the checkpoint its
# --save names stays as it was, and no temporary is left. (A save that fails
# while writing, over the file size limit, is test_outputs.sh's.)
cp "$work/good.safetensors" "$work/target.safetensors"
expect_error "save into a missing directory" 1 "cannot write checkpoint" 1 $small --steps 1 --save "$work/missing/dir/x.safetensors"
expect_error "resume from a truncated file, save elsewhere" 1 "trunc" 1 $small --resume "$work/trunc.safetensors" --save "$work/target.safetensors"
if cmp -s "$work/target.safetensors" "$work/keep.safetensors"; then ok "existing checkpoint untouched"; else not_ok "existing checkpoint was modified"; fi
if ls "$work"/*.tmp.* >/dev/null 2>&1; then not_ok "temporary files left behind"; else ok "no temporary files left"; fi

# The help says what --show-grid does: "print every virtual GPU and its TP, PP
# and DP groups for this layout, then exit (no training)" - so the map and
# nothing of a run (no step line, no trained summary, no sample).
tt 4 --tp 2 --dp 2 --show-grid
if [ "$status" -eq 0 ] && grep -q "TP groups (2 groups of 2 GPUs): {0,1} {2,3}" "$work/out" &&
    ! grep -q "^step \|^trained \|^sample" "$work/out"; then
    ok "--show-grid prints the groups and exits without training, as --help says"
else
    not_ok "--show-grid: exit $status, or it trained"
fi
# ... so a checkpoint asked for with it would never be written: refused.
expect_error "--show-grid with --save" 2 "--show-grid trains nothing, so --save would be ignored" 4 --tp 2 --dp 2 --show-grid --save "$work/grid.st"
[ ! -e "$work/grid.st" ] && ok "no checkpoint from --show-grid" || not_ok "--show-grid wrote a checkpoint"
finish
