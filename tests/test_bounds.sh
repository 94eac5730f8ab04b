#!/bin/sh
# tests/test_bounds.sh - sizes and inputs that used to abort (exit 134 and a
# backtrace per rank), spin or hang now end within seconds with exit 1 or 2
# on every rank and one clear line: models too big for the host or for
# --gpu-mem (refused before anything is allocated), a checkpoint's metadata
# out of the flags' ranges or contradicting itself, --stage-layers past the
# int range, --sample-len past its bound, --data files that are no regular
# file, larger than the memory per rank, too small for the eval split, or not
# the same on every rank, and the other input files (--resume, --cluster,
# --plot's CSVs) when they are a FIFO.
. "$TT_SRCDIR/testlib.sh"

q="--quiet --sample-len 0 --steps 1 --eval-every 0"
small="--layers 1 --dim 16 --heads 2 --seq 8 --batch 2 --micro-batches 1 $q"

# expect_quick: expect_error, and the run ended within 10 seconds.
expect_quick() {
    t0=$(date +%s)
    expect_error "$@"
    t=$(($(date +%s) - t0))
    [ "$t" -le 10 ] && echo "# $1: $t s" || not_ok "$1: took $t s"
}

# Models that cannot be allocated: the figure they need, before allocating.
big="--dim 8192 --layers 96 --heads 16 $q"
expect_quick "huge model, 1 rank" 1 "gpu0(dp0,pp0,tp0) needs up to [0-9]* MiB .* this host has" 1 $big
expect_quick "huge model, 4 ranks" 1 "needs up to [0-9]* MiB .* / 4 ranks on this host" 4 $big --pp 2
expect_quick "1024 x 48 model, 2 ranks (host memory per rank)" 1 "needs up to [0-9]* MiB" 2 --dim 1024 --layers 48 --heads 16 $q
expect_quick "--seq 65536" 1 "needs up to [0-9]* MiB" 1 --seq 65536 $q
expect_quick "huge --batch" 1 "needs up to [0-9]* MiB" 2 --batch 1048576 --micro-batches 1 $q
expect_quick "--gpu-mem, 1 rank" 1 "gpu0(dp0,pp0,tp0) needs [0-9]* MiB for its weights, gradients and Adam state alone (before activations), --gpu-mem is 16 MiB" 1 $big --gpu-mem 16M
expect_quick "--gpu-mem, 4 ranks" 1 "needs [0-9]* MiB for its weights, gradients and Adam state alone" 4 $big --tp 2 --pp 2 --gpu-mem 16M
# A --gpu-mem below 1 MiB in the units that show it: in whole MiB both
# figures read 0 ("needs 0 MiB ..., --gpu-mem is 0 MiB"). $small's four
# kinds of parameters are 4 x 11632 floats x 4 bytes = 181.75 KiB (its
# table: 2 x 256 x 16 embedding and head, 8 x 16 positions, one block of
# 12 x 16^2 + 13 x 16, ln_f 2 x 16).
expect_quick "--gpu-mem 100K: KiB" 1 "gpu0(dp0,pp0,tp0) needs 182 KiB for its weights, gradients and Adam state alone (before activations), --gpu-mem is 100 KiB$" 1 $small --gpu-mem 100K
expect_quick "--gpu-mem 4: bytes" 1 "needs 186112 bytes for its weights, gradients and Adam state alone (before activations), --gpu-mem is 4 bytes$" 2 $small --gpu-mem 4

# Flags: past the int range, past the bound.
expect_quick "--stage-layers 4294967296, 1 rank" 2 "chunk 0 would have more blocks than --layers 6" 1 --stage-layers 4294967296 $q
expect_quick "--stage-layers 4294967296,6, 2 ranks" 2 "chunk 0 would have more blocks than --layers 6" 2 --pp 2 --stage-layers 4294967296,6 $q
expect_quick "--sample-len 1048576, 1 rank" 2 "--sample-len must be between 0 and 65536" 1 --sample-len 1048576
expect_quick "--sample-len 1048576, 3 ranks" 2 "--sample-len must be between 0 and 65536" 3 --sample-len 1048576

# --data: not a regular file (nobody writes the FIFO: opening it would
# block), too small for the eval split, different bytes on each rank.
mkfifo "$work/fifo"
expect_quick "--data FIFO, 1 rank" 1 "data file '$work/fifo' is not a regular file" 1 $small --data "$work/fifo"
expect_quick "--data FIFO, 3 ranks" 1 "data file '$work/fifo' is not a regular file" 3 $small --batch 3 --data "$work/fifo"
# The other inputs were opened with a plain open, which waits for a writer of
# the FIFO: every rank hung until the job's timeout. The reason in each
# message is the kind of file, so it must name the FIFO as no regular file.
expect_quick "--resume FIFO, 2 ranks" 1 "cannot open checkpoint '$work/fifo': not a regular file" 2 $small --batch 2 --resume "$work/fifo"
expect_quick "--resume auto onto a FIFO --save, 2 ranks" 1 "checkpoint '$work/fifo' exists but cannot be continued from .*: not a regular file" 2 $small --save "$work/fifo" --resume auto
expect_quick "--cluster FIFO, 2 ranks" 2 "--cluster $work/fifo: .* not a readable file: not a regular file" 2 $small --cluster "$work/fifo"
# A cluster file is one JSON object and nothing after it: a second value, or
# a NUL and junk, was ignored (the file taken for its first object).
printf '{"based_on": "classroom"} trailing junk' > "$work/junk.json"
expect_quick "--cluster with junk after its object, 2 ranks" 2 "--cluster $work/junk.json: not valid JSON (at byte 26 of 39;" 2 $small --cluster "$work/junk.json"
printf '{"based_on": "classroom"}\n\000{}' > "$work/nul.json"
expect_quick "--cluster with a NUL and more after its object, 1 rank" 2 "--cluster $work/nul.json: not valid JSON (at byte 26 of 29;" 1 $small --cluster "$work/nul.json"
# A field given twice: JSON readers differ on which counts (cJSON the first,
# others the last), so the file is refused.
printf '{"based_on": "classroom", "pue": 1.2, "pue": 1.5}' > "$work/twice.json"
expect_quick "--cluster with a field given twice, 2 ranks" 2 "--cluster $work/twice.json: the field \"pue\" is given twice (give each field once)" 2 $small --cluster "$work/twice.json"
# A value out of range is named as the file wrote it (the message once gave
# only the range), each kind of field in its own branch of the reader.
for bad in 'pue: 0:pue must be a number from 1 to 10, not 0' \
           'based_on: "dgx":based_on must name a built-in cluster (.*), not "dgx"' \
           'name: "":name must be a string of 1-40 characters, not ""' \
           'gpus_per_server: 2.5:gpus_per_server must be a whole number from 1 to 1048576, not 2.5'; do
    field=${bad%%:*}; rest=${bad#*: }; value=${rest%%:*}; want=${rest#*:}
    if [ "$field" = based_on ]; then printf '{"based_on": %s}' "$value"; else printf '{"based_on": "classroom", "%s": %s}' "$field" "$value"; fi > "$work/bad.json"
    expect_quick "--cluster with $field $value, 1 rank" 2 "--cluster $work/bad.json: $want" 1 $small --cluster "$work/bad.json"
done
# Without based_on every field must be given. A field whose range starts at
# 0 (a free link, no watts, no price) was taken as given when absent: its
# zero passed the range test, so a file without its links planned free ones.
full='"name": "whole", "gpus_per_server": 8, "peak_flops": 1e14, "peak_flops_fp32": 2e13,
 "gemm_efficiency": 0.7, "memory_bandwidth": 2e12, "gpu_memory_bytes": 8e10, "nvlink_bandwidth": 3e11,
 "nvlink_latency": 5e-6, "network_bandwidth": 2.5e10, "network_latency": 1e-5, "gpu_watts": 400, "pue": 1.2,
 "price_per_kwh": 0.1, "gpu_mtbf_hours": 5e4, "storage_bandwidth": 1e10'
printf '{%s}' "$full" > "$work/whole.json"
tt 1 $small --steps 1 --cluster "$work/whole.json"
[ "$status" -eq 0 ] && grep -q '^virtual time on whole' "$work/out" && ok "a cluster file with every field, no based_on" ||
    not_ok "a cluster file with every field was refused (exit $status): $(cat "$work/err")"
for f in nvlink_bandwidth nvlink_latency network_bandwidth network_latency gpu_watts price_per_kwh; do
    printf '{%s}' "$full" | sed "s/\"$f\": [^,]*, *//" > "$work/part.json"
    expect_quick "--cluster without $f (no based_on), 1 rank" 2 "--cluster $work/part.json: $f missing" 1 $small --cluster "$work/part.json"
done
expect_quick "--plot of a FIFO, 1 rank" 1 "--plot: cannot read '$work/fifo': not a regular file" 1 --plot "$work/plot.svg" "$work/fifo"
[ ! -e "$work/plot.svg" ] && ok "no plot written from a FIFO" || not_ok "a plot was written from a FIFO"
# A file larger than the host's memory per rank: every rank would read it
# whole, and the OOM killer would end them without a word. Refused from its
# size (a sparse file of 1 TiB: no disk used, and nothing is read).
if truncate -s 1T "$work/huge" 2>/dev/null; then
    expect_quick "--data of 1 TiB, 2 ranks" 1 "data file '$work/huge' has 1048576 MiB, but this host has [0-9]* MiB of memory per rank" 2 $small --data "$work/huge"
    rm -f "$work/huge"
else
    echo "# skipped: --data of 1 TiB (no sparse file of that size here)"
fi
i=0
while [ $i -lt 500 ]; do printf 'abcdefghij'; i=$((i + 1)); done > "$work/5k.txt"
expect_quick "--data too small for --seq 700's eval split, 1 rank" 1 "has 5000 bytes; with --seq 700 it needs at least 7010" 1 $q --data "$work/5k.txt" --seq 700
expect_quick "--data too small for --seq 700's eval split, 2 ranks" 1 "has 5000 bytes; with --seq 700 it needs at least 7010" 2 $q --data "$work/5k.txt" --seq 700
expect_quick "--data /proc/self/status, 2 ranks" 1 "data file '/proc/self/status' is not the same on every rank" 2 $small --data /proc/self/status
expect_quick "--data /proc/self/status, 4 ranks" 1 "data file '/proc/self/status' is not the same on every rank" 4 $small --batch 4 --data /proc/self/status

# Checkpoint metadata: a real checkpoint with one key changed.
tt 1 --layers 1 --dim 16 --heads 2 --seq 8 --batch 2 --micro-batches 1 --steps 0 --quiet --sample-len 0 --save "$work/good.safetensors"
[ "$status" -eq 0 ] && ok "a checkpoint to edit" || not_ok "a checkpoint to edit"
cat > "$work/meta.py" <<'PY'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
with open(src, "rb") as f:
    blob = f.read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
header["__metadata__"][key] = value
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
PY
# meta CASE NP KEY VALUE PATTERN: resuming from the checkpoint with KEY = VALUE.
meta() {
    python3 "$work/meta.py" "$work/good.safetensors" "$work/bad.safetensors" "$3" "$4"
    expect_quick "checkpoint $3 = $4, $2 rank(s)" 1 "$5" "$2" --resume "$work/bad.safetensors" --quiet --sample-len 0 --eval-every 0
}
ck="checkpoint '$work/bad.safetensors'"
meta layers 1 layers 1000000 "$ck: 'layers' = 1000000 is outside \[1, 1024\], the range of --layers"
meta dim 2 dim 100000 "$ck: 'dim' = 100000 is outside \[1, 65536\], the range of --dim"
meta steps 3 steps 1000000000000 "$ck: 'steps' = 1000000000000 is outside"
meta beta1 4 beta1 1 "$ck: 'beta1' = 1 is outside \[0, 0.999999\], the range of --beta1"
meta eps 1 eps -1e-8 "$ck: 'eps' = -1e-08 is outside (0, 1\]"
meta lr 2 lr 1e300 "$ck: 'lr' = 1e+300 is outside \[0, 10\], the range of --lr"
# In range, but deeper than the tensors the file holds: found from its
# header before a model that deep is built.
meta deep 2 layers 1024 "$ck: its metadata says layers 1024, but tensor 'blocks.1023.mlp.fc2.weight' is missing"
# Each value in its range, but two that contradict each other: the file is
# damaged (exit 1, naming it and the keys), not flags the user gave (it was
# "--heads 3 must divide --dim 16", exit 2). The good file has dim 16, batch
# 2, lr 0.003 (the default); 3 divides neither 16 nor 2.
meta heads 2 heads 3 "$ck: 'heads' = 3 does not divide 'dim' = 16$"
meta micro_batches 1 micro_batches 3 "$ck: 'micro_batches' = 3 does not divide 'batch' = 2$"
meta lr_min 2 lr_min 0.5 "$ck: 'lr_min' = 0.5 is above 'lr' = 0.003$"
# One value given, the other the file's: a usage error, and the message says
# where the value not given came from.
expect_quick "--micro-batches 3 against the checkpoint's batch 2" 2 "^tiny_transformer: --micro-batches 3 must divide --batch 2 (values not given on the command line come from checkpoint '$work/good.safetensors')$" 2 --resume "$work/good.safetensors" --micro-batches 3 --quiet --sample-len 0
# In the flags' ranges, but no host holds the model: the memory check.
meta bigdim 1 dim 65536 "needs up to [0-9]* MiB"
meta bigbatch 2 batch 1048576 "needs up to [0-9]* MiB"
finish
