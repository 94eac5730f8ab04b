#!/bin/sh
# tests/test_ckpt_golden.sh - checkpoints did not change: two fixed tiny runs
# on 1 rank must save files whose sha256 equals the one recorded here.
#
#   --steps 2   two training steps: weights, Adam moments, metadata
#   --steps 0   the initial weights only (no BLAS call on the way)
#
# The hashes were recorded with the build of commit 32b301d, before the
# checkpoint code was split into src/train/ckpt_*.c; the split had to keep
# every byte. A failure here means a checkpoint's bytes changed: if that is
# intended, re-record the hashes with the new build and say why in the commit.
#
# Trained floats depend on the BLAS kernel, which OpenBLAS picks from the CPU
# (or from OPENBLAS_CORETYPE), and on its version. So each row of hashes comes
# with the facts of the machine it was recorded on: the CPU's model name in
# /proc/cpuinfo, OPENBLAS_CORETYPE, and what OpenBLAS itself reports
# (openblas_get_config: version and the kernel it chose). On a machine where
# they differ the test cannot know the right bits of --steps 2 and skips it;
# --steps 0 calls no BLAS, so its hash is the same on every machine and is
# checked everywhere.
#
# The Zen row was added at 6acb642 on a machine whose OpenBLAS picked its Zen
# kernel: it gave the Haswell row's hashes (OpenBLAS builds its Zen target
# from the Haswell kernels), an independent match with the recorded bits.
#
# Re-recorded in session 8 (both rows, on a Zen machine, with and without
# OPENBLAS_CORETYPE=Haswell, giving the same hash again): the attention's
# per-head products moved from cblas_sgemm to src/core/small_gemm.c, whose
# sums run in another order than OpenBLAS's small-matrix paths (its own
# test_kernels_gemm checks those bits against the stated FMA chain, and
# --validate the whole model against float64). The row for OpenBLAS's
# Cooperlake kernel (AVX-512) was dropped: no machine here can run that
# kernel to record it again, so such a machine now skips --steps 2. Every
# row is of small_gemm's own kernel, so a CPU whose flags lack avx2 or fma
# (a virtual machine may hide them) skips --steps 2 too: its attention runs
# on cblas_sgemm.
#
# The Cooperlake row came back in session 17, from an AVX-512 AMD EPYC whose
# OpenBLAS picks that kernel. The same build on that machine gave the other
# rows' recorded hash under OPENBLAS_CORETYPE=Haswell and =Zen, so the row
# holds the code those rows hold and differs from them only in the kernel.
#
# Re-recorded in session 21 (every row): the header changed, not the data.
# It gained the key "data" (the --data file; "" here) and writes doubles in
# the fewest digits that read back the same ("0.003" for
# "0.0030000000000000001"). The build before (e8dd753) gave the recorded
# hashes again, and beside it the new build's files held byte-identical data
# sections and tensor entries, and metadata equal in value, key by key, for
# --steps 0 and 2, under the Cooperlake kernel and under
# OPENBLAS_CORETYPE=Haswell (whose hash is again the Zen row's).
#
# Exit status: 0 pass, 1 mismatch, 77 skipped (other machine facts for
# --steps 2 and --steps 0 as recorded, or no sha256).
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 2 --dim 16 --heads 2 --seq 8 --batch 4 --micro-batches 2 --quiet --sample-len 0"
# One BLAS thread, as the hashes were recorded (run-test's default too).
OPENBLAS_NUM_THREADS=1
export OPENBLAS_NUM_THREADS

# cpu model name | OPENBLAS_CORETYPE | openblas_get_config() | sha256 of --steps 2 | of --steps 0
golden='AMD EPYC|Haswell|OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64|88e7161bdac4c937f285f639ec17cf1b8c5dd26695007c25928a46cf707e1202|b56db1404b29114834868b2f33fc7c7024ac27c12366b5291e4966ec4bf8e73c
AMD EPYC|unset|OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64|88e7161bdac4c937f285f639ec17cf1b8c5dd26695007c25928a46cf707e1202|b56db1404b29114834868b2f33fc7c7024ac27c12366b5291e4966ec4bf8e73c
AMD EPYC|unset|OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64|733673484b25bec417f94c912a192aef88efd03ee9e7da63c0dfe85e56d97455|b56db1404b29114834868b2f33fc7c7024ac27c12366b5291e4966ec4bf8e73c'
# the --steps 0 hash, the same in every row (no BLAS call)
steps0=b56db1404b29114834868b2f33fc7c7024ac27c12366b5291e4966ec4bf8e73c

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
coretype=${OPENBLAS_CORETYPE:-unset}
# The library the program loads (it links -lopenblas), asked in this
# environment, so the answer is the kernel the program will use.
blas=$(python3 -c 'import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_config.restype = ctypes.c_char_p
print(lib.openblas_get_config().decode())' 2>/dev/null) || blas=unknown
row=$(printf '%s\n' "$golden" |
      awk -F'|' -v c="$cpu" -v t="$coretype" -v b="$blas" '$1 == c && $2 == t && $3 == b')
# The attention's products: small_gemm's kernel where the CPU has AVX2 and FMA
flags=" $(sed -n 's/^flags[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1) "
case "$flags" in *" avx2 "*) case "$flags" in *" fma "*) attn=fma ;; *) attn=cblas ;; esac ;; *) attn=cblas ;; esac
[ "$attn" = fma ] || row=
if command -v sha256sum >/dev/null 2>&1; then
    sha() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
    sha() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
    echo "SKIP: neither sha256sum nor shasum found"
    exit 77
fi

golden_case() { # STEPS SHA256
    steps=$1 want=$2
    tt 1 $cfg --steps "$steps" --save "$work/golden.$steps.safetensors"
    got=$(sha "$work/golden.$steps.safetensors" 2>/dev/null)
    if [ "$status" -ne 0 ]; then
        not_ok "--steps $steps: exit $status"
    elif [ "$got" = "$want" ]; then
        ok "--steps $steps: sha256 $got as recorded"
    else
        not_ok "--steps $steps: sha256 $got, recorded $want"
    fi
}
golden_case 0 "$steps0"
if [ -z "$row" ]; then
    echo "--steps 2 skipped: no golden hashes for this machine (cpu '$cpu'," \
         "OPENBLAS_CORETYPE $coretype, '$blas', attention on $attn); they were recorded" \
         "with small_gemm's FMA kernel for:"
    printf '%s\n' "$golden" | cut -d'|' -f1-3 | sed 's/^/    /'
    [ "$failures" -eq 0 ] && exit 77
    finish
fi
golden_case 2 "$(printf '%s\n' "$row" | cut -d'|' -f4)"
finish
