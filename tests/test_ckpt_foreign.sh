#!/bin/sh
# tests/test_ckpt_foreign.sh - our reader on a checkpoint from an independent
# writer. test_safetensors_py.sh reads our file with Python; this is the other
# direction: Python (standard library only: struct, json, math, zlib) writes a
# safetensors checkpoint by itself, from doc/design.md sections 4 and 6 and the
# metadata keys of doc/design.md, so a misreading shared by our writer and our
# reader cannot hide. The Python file is laid out the way the safetensors
# library lays out its own (tensors sorted by name, data in that order), not
# the way ours are, so the reader cannot lean on our order either.
#
#   1. resumed and saved at once (no step trained), on 1 rank and on
#      tp 2 x pp 2, the program's file holds exactly the Python values: the
#      same bytes for every tensor, and the same metadata;
#   2. resumed one step further, the run trains (exit 0, a finite loss);
#   3. planted faults are refused with exit 1 and a message naming the tensor:
#      one flipped data byte (a checksum mismatch), a wrong shape in the header.
#
# Exit status: 0 pass, 1 failure, 77 skipped (no python3).
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found: skipping the independent safetensors writer"
    exit 77
fi

# The step the Python file is at. Its model (st.py: 2 layers, width 16, 2
# heads, context 8) keeps a step cheap and allows tp 2; the program takes
# the model and the hyper-parameters from the file.
step=3
quiet="--quiet --sample-len 0"

cat > "$work/st.py" <<'EOF'
"""A safetensors writer, checker and saboteur for tiny_transformer checkpoints,
written from the documents only (python3 standard library)."""
import json, math, struct, sys, zlib

L, C, NH, T, V = 2, 16, 2, 8, 256
STEP = int(sys.argv[2]) if sys.argv[1] == "write" else 0

def tensors():
    """doc/design.md section 4: (name, shape) of every parameter."""
    out = [("tok_emb.weight", [V, C]), ("pos_emb.weight", [T, C])]
    for i in range(L):
        b = "blocks.%d." % i
        out += [(b + "ln1.weight", [C]), (b + "ln1.bias", [C])]
        for x in ("q", "k", "v", "proj"):
            out += [(b + "attn.%s.weight" % x, [C, C]), (b + "attn.%s.bias" % x, [C])]
        out += [(b + "ln2.weight", [C]), (b + "ln2.bias", [C]),
                (b + "mlp.fc1.weight", [4 * C, C]), (b + "mlp.fc1.bias", [4 * C]),
                (b + "mlp.fc2.weight", [C, 4 * C]), (b + "mlp.fc2.bias", [C])]
    return out + [("ln_f.weight", [C]), ("ln_f.bias", [C]), ("lm_head.weight", [V, C])]

def values(k, kind, n):
    """Stored array number k: a sine of the flat index, shifted per array.
    The second moment v must be positive (Adam divides by its root)."""
    s = [math.sin(0.37 * i + 1.1 * k) for i in range(n)]
    if kind == "w":
        return [0.1 * x for x in s]
    if kind == "m":
        return [1e-3 * x for x in s]
    return [1e-6 * (1.0 + x * x) for x in s]

def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n

def write(path):
    arrays = {}
    k = 0
    for prefix, kind in (("", "w"), ("optim.m.", "m"), ("optim.v.", "v")):
        for name, shape in tensors():
            k += 1
            vals = values(k, kind, numel(shape))
            arrays[prefix + name] = (shape, struct.pack("<%df" % len(vals), *vals))
    meta = {"format": "tiny_transformer/1", "step": str(STEP),
            "vocab": str(V), "layers": str(L), "dim": str(C), "heads": str(NH),
            "seq": str(T), "batch": "4", "micro_batches": "2", "steps": str(STEP),
            "lr": "0.002", "lr_min": "0.0002", "warmup": "2", "weight_decay": "0.05",
            "clip": "1", "beta1": "0.9", "beta2": "0.95", "eps": "1e-08",
            "seed": "42", "eval_every": "0", "tp": "2", "pp": "1", "dp": "1"}
    header = {"__metadata__": meta}
    data, at = [], 0
    for name in sorted(arrays):
        shape, raw = arrays[name]
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + len(raw)]}
        meta["crc32." + name] = "%08x" % (zlib.crc32(raw) & 0xFFFFFFFF)
        data.append(raw)
        at += len(raw)
    write_file(path, header, b"".join(data))

def write_file(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)

def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    return header, blob[8 + n:]

def tensor_bytes(header, data, name):
    b, e = header[name]["data_offsets"]
    return data[b:e]

def same(ours, theirs, layout):
    """Every tensor of the Python file `ours`, byte for byte, in `theirs`."""
    h1, d1 = read(ours)
    h2, d2 = read(theirs)
    m1, m2 = h1.pop("__metadata__"), h2.pop("__metadata__")
    bad = []
    if sorted(h1) != sorted(h2):
        bad.append("tensor names differ: only in ours %s, only in theirs %s"
                   % (sorted(set(h1) - set(h2))[:3], sorted(set(h2) - set(h1))[:3]))
    checked = 0
    for name in sorted(set(h1) & set(h2)):
        if h1[name]["shape"] != h2[name]["shape"] or h2[name]["dtype"] != "F32":
            bad.append("%s: shape %s/%s, dtype %s" % (name, h1[name]["shape"],
                       h2[name]["shape"], h2[name]["dtype"]))
        elif tensor_bytes(h1, d1, name) != tensor_bytes(h2, d2, name):
            bad.append("%s: data differs" % name)
        else:
            checked += 1
        raw = tensor_bytes(h2, d2, name)
        if m2.get("crc32." + name) != "%08x" % (zlib.crc32(raw) & 0xFFFFFFFF):
            bad.append("%s: crc32 in the saved file does not match its data" % name)
    # Every value a resumed run adopts carries over (numbers compared as
    # numbers: the program writes doubles with 17 digits). Not eval_every,
    # an output setting taken from the command line; the layout is the saver's.
    for key, value in m1.items():
        if key.startswith("crc32.") or key in ("eval_every", "tp", "pp", "dp"):
            continue
        got = m2.get(key)
        try:
            ok = got == value or float(got) == float(value)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            bad.append("metadata %s: %r, the Python file has %r" % (key, got, value))
    want = dict(zip(("tp", "pp", "dp"), layout.split(",")))
    for key in want:
        if m2.get(key) != want[key]:
            bad.append("metadata %s: %r, saved on %s" % (key, m2.get(key), want[key]))
    for b in bad[:10]:
        print("   ", b)
    if bad or checked != 3 * len(tensors()):
        sys.exit(1)
    print("%d tensors identical, metadata carried over" % checked)

def flip(src, dst, name):
    """One byte of `name`'s data changed; header (and its checksum) kept."""
    header, data = read(src)
    b, _ = header[name]["data_offsets"]
    data = bytearray(data)
    data[b + 5] ^= 0x40
    write_file(dst, header, bytes(data))

def reshape(src, dst, name, rows, cols):
    """`name` claims another shape with as many elements (so its offsets
    still fit and only the shape is wrong)."""
    header, data = read(src)
    header[name]["shape"] = [int(rows), int(cols)]
    write_file(dst, header, data)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "write":
    write(args[1])
elif cmd == "same":
    same(*args)
elif cmd == "flip":
    flip(*args)
elif cmd == "reshape":
    reshape(*args)
EOF

f=$work/foreign.safetensors
if python3 "$work/st.py" write "$step" "$f" >"$work/out" 2>"$work/err"; then
    ok "Python wrote a checkpoint at step $step ($(wc -c < "$f") bytes)"
else
    not_ok "the Python writer failed"
    finish
fi

# 1. Read and written back at once: the same tensors, byte for byte.
same_as_python() { # WHAT NP LAYOUT(tp,pp,dp) FLAGS...
    what=$1 np=$2 layout=$3
    shift 3
    g=$work/saved.$np.safetensors
    tt "$np" --resume "$f" --steps "$step" --save "$g" $quiet "$@"
    if [ "$status" -ne 0 ]; then
        not_ok "$what: resume and save exited $status"
    elif python3 "$work/st.py" same "$f" "$g" "$layout" >"$work/out" 2>&1; then
        ok "$what: $(cat "$work/out")"
    else
        not_ok "$what: the saved file is not the Python one"
    fi
}
same_as_python "1 GPU" 1 1,1,1
same_as_python "tp 2 x pp 2" 4 2,2,1 --tp 2 --pp 2

# 2. One step further: the run starts from the Python values and trains
# step 3 (the log's steps count from 0) to a finite, positive loss.
one_more_step() { # WHAT NP FLAGS...
    what=$1 np=$2
    shift 2
    rm -f "$work/log.csv"
    tt "$np" --resume "$f" --steps $((step + 1)) --log "$work/log.csv" $quiet "$@"
    loss=$(awk -F, -v s="$step" 'NR > 1 && $1 == s { print $2 }' "$work/log.csv" 2>/dev/null)
    rows=$(($(wc -l 2>/dev/null < "$work/log.csv" || echo 1) - 1))
    if [ "$status" -eq 0 ] && [ "$rows" -eq 1 ] &&
            awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9]+[.][0-9]+$/ && l > 0) }'; then
        ok "$what: resumed one step, step $step trained, loss $loss"
    else
        not_ok "$what: resumed one step: exit $status, $rows log rows, loss '$loss' at step $step"
    fi
}
one_more_step "1 GPU" 1
one_more_step "tp 2 x pp 2" 4 --tp 2 --pp 2

# 3. Planted faults, on 1 rank and on tp 2 x dp 2. With no pipeline every
# rank holds a slice of every tensor, so each finds the fault by itself: this
# tests the reader, not how the caller spreads a load error found by one
# pipeline stage only.
python3 "$work/st.py" flip "$f" "$work/flipped.safetensors" blocks.1.mlp.fc1.weight
for np in 1 4; do
    layout=; [ "$np" = 4 ] && layout="--tp 2 --dp 2"
    expect_error "flipped byte, $np GPU(s)" 1 "checksum .*'blocks\.1\.mlp\.fc1\.weight'" \
        "$np" --resume "$work/flipped.safetensors" --steps $((step + 1)) $quiet $layout
done
# The same fault seen by one pipeline stage only: with pp 2, block 1 lives on
# stage 1, so only its GPU finds the bad checksum. Every rank must still stop
# with exit 1 and rank 0 print that GPU's message (not hang in the next
# collective, as a load error not agreed by all ranks would).
expect_error "flipped byte seen by pipeline stage 1 only" 1 \
    "checksum .*'blocks\.1\.mlp\.fc1\.weight'" \
    2 --resume "$work/flipped.safetensors" --steps $((step + 1)) $quiet --pp 2
python3 "$work/st.py" reshape "$f" "$work/reshaped.safetensors" blocks.0.attn.proj.weight 8 32
for np in 1 4; do
    layout=; [ "$np" = 4 ] && layout="--tp 2 --dp 2"
    expect_error "wrong shape, $np GPU(s)" 1 "'blocks\.0\.attn\.proj\.weight' has shape \[8,32\]" \
        "$np" --resume "$work/reshaped.safetensors" --steps $((step + 1)) $quiet $layout
done
finish
