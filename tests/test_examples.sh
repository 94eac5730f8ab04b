#!/bin/sh
# tests/test_examples.sh - the classroom programs in examples/ run on the rank
# counts they are written for, pass their own checks (each exits non-zero when
# its sharded result differs from the unsharded one or its traffic from its
# formula) and print what the lab handouts tell students to look for.
. "$TT_SRCDIR/testlib.sh"

exdir="$(dirname "$TT_BIN")/examples"

# example NP NAME TEXT...: examples/NAME on NP ranks exits 0 and prints every
# TEXT (fixed strings); stdout in $work/out.
example() {
    np=$1 name=$2
    shift 2
    what="$name on $np rank(s)"
    if [ ! -x "$exdir/$name" ]; then
        not_ok "$what: $exdir/$name is not built"
        return 1
    fi
    $TT_MPIRUN -np "$np" "$exdir/$name" >"$work/out" 2>"$work/err"
    status=$?
    if [ "$status" -ne 0 ]; then
        not_ok "$what: exit $status"
        return 1
    fi
    for text in "$@"; do
        if ! grep -qF -- "$text" "$work/out"; then
            not_ok "$what: no '$text' in the output"
            return 1
        fi
    done
    ok "$what: $(tail -n 1 "$work/out")"
}

example 1 ex_single_gpu "OK"

# The seed chapter's walk-through: GPipe, p = 4, m = 4 takes 2(m+p-1) = 14 time
# steps; activations of 4 samples x 16 floats (256 bytes) go forward, errors
# come back; the first and last steps have one GPU busy, the middle ones all.
if example 4 ex_pipeline_walkthrough "A1 processes x1 -> y1" "A1 -> A2 y3 (256 bytes)" \
    "B2 processes y1 -> model output 1" "B2 -> B1 error E4 (256 bytes)" \
    "Active GPUs (100%): A1, A2, B1, B2" "OK: pipelined gradients match"; then
    steps=$(grep -c '^Time step' "$work/out")
    first=$(grep -m 1 'Active GPUs' "$work/out")
    last=$(grep 'Active GPUs' "$work/out" | tail -n 1)
    if [ "$steps" -eq 14 ] && [ "$first" = "  Active GPUs (25%): A1" ] &&
        [ "$last" = "  Active GPUs (25%): A1" ] && grep -q "B2 computes local error E4" "$work/out"; then
        ok "pipeline walk-through: 14 time steps, A1 alone at both ends"
    else
        not_ok "pipeline walk-through: $steps time steps, first '$first', last '$last'"
    fi
fi

# Column- and row-parallel y = x W^T with B 8, C_in 24, C_out 12: 96 floats
# (384 bytes) for y, 192 floats (768 bytes) for dx, on any TP group size.
for np in 2 3 4; do
    example "$np" ex_column_row "all-gather -> whole y    384 bytes = B*C_out" \
        "all-reduce -> whole y  384 bytes = B*C_out" "768 bytes = B*C_in" \
        "OK: both splits reproduce the unsharded layer"
done

# Data parallelism: one gradient (16*8 + 8 floats = 544 bytes) per step,
# whatever dp; replicas bit-identical.
for np in 2 3 4; do
    example "$np" ex_data_parallel "544 bytes (8 calls in 8 steps)" "-> bit-identical" \
        "OK: replicas identical and equal to one process on the whole batch"
done

# The CNN hybrid: conv gradients (376 floats) all-reduced, fc activations
# (2 x 16 x 128 + 16 x 10 = 4256 floats) exchanged.
example 4 ex_cnn_hybrid "(measured 376)" "(measured 4256 = 2048 + 2048 + 160)" "hybrid 4632 floats" \
    "OK: the hybrid computes the same gradients as one process"

# A wrong rank count is refused with a message, not run.
$TT_MPIRUN -np 2 "$exdir/ex_pipeline_walkthrough" >"$work/out" 2>"$work/err"
status=$?
if [ "$status" -ne 0 ] && grep -q "needs exactly 4 ranks" "$work/err"; then
    ok "ex_pipeline_walkthrough on 2 ranks refused: $(head -n 1 "$work/err")"
else
    not_ok "ex_pipeline_walkthrough on 2 ranks: exit $status"
fi
finish
