#!/bin/sh
# tests/test_safetensors_py.sh - reads a tiny_transformer checkpoint with an
# independent safetensors reader (python3 standard library only: json, struct,
# zlib), so a bug shared by our writer and our reader cannot hide.
#
#   TT_BIN       the tiny_transformer program; the test runs
#                $TT_MPIRUN -np 1 $TT_BIN --steps 0 --save F
#                and checks F against the format and the model of doc/design.md sections 4 and 6.
#   TT_MPIRUN    launcher (set by run-test; plain mpirun otherwise).
#   TT_CKPT_FILE if set, check this existing file instead (format checks only,
#                no model-specific ones) - for trying the reader by hand.
#
# Exit status: 0 pass, 1 mismatch, 77 skipped (no python3), 99 test setup error.
set -u

if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not found: skipping the independent safetensors reader"
    exit 77
fi

tmp=
cleanup() { [ -n "$tmp" ] && rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if [ -n "${TT_CKPT_FILE:-}" ]; then
    file=$TT_CKPT_FILE
    mode=file
else
    if [ -z "${TT_BIN:-}" ]; then
        echo "TT_BIN is not set (the path of tiny_transformer)" >&2
        exit 99
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt_st_XXXXXX") || exit 99
    file=$tmp/init.safetensors
    # shellcheck disable=SC2086 # TT_MPIRUN is a command with its flags
    if ! ${TT_MPIRUN:-mpirun} -np 1 "$TT_BIN" --steps 0 --save "$file" --quiet \
            >"$tmp/out" 2>&1; then
        echo "FAIL: tiny_transformer --steps 0 --save failed:" >&2
        cat "$tmp/out" >&2
        exit 1
    fi
    mode=program
fi

python3 - "$file" "$mode" <<'EOF'
import json, math, struct, sys, zlib

path, mode = sys.argv[1], sys.argv[2]
errors = []

def fail(msg):
    errors.append(msg)

def finish():
    for m in errors:
        print("FAIL: %s: %s" % (path, m), file=sys.stderr)
    if errors:
        sys.exit(1)
    print("ok: %s" % path)
    sys.exit(0)

with open(path, "rb") as f:
    blob = f.read()

# --- framing: u64 LE length, JSON padded with spaces, data 8-byte aligned ---
if len(blob) < 8:
    fail("only %d bytes" % len(blob)); finish()
(hlen,) = struct.unpack("<Q", blob[:8])
if hlen > len(blob) - 8:
    fail("header length %d exceeds the file" % hlen); finish()
if (8 + hlen) % 8:
    fail("data section starts at %d, not a multiple of 8" % (8 + hlen))
raw = blob[8:8 + hlen]
data = blob[8 + hlen:]
if raw.rstrip(b" ") != raw.rstrip(b" \t\r\n"):
    fail("header padded with something other than spaces")

def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate keys in the header")
    return dict(pairs)

try:
    header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
except (UnicodeDecodeError, ValueError) as exc:
    fail("header is not JSON: %s" % exc); finish()
if not isinstance(header, dict):
    fail("header is not a JSON object"); finish()

meta = header.pop("__metadata__", None)
if not isinstance(meta, dict):
    fail("no __metadata__ map"); finish()
for k, v in meta.items():
    if not isinstance(v, str):
        fail("__metadata__[%r] is not a string" % k)
if meta.get("format") != "tiny_transformer/1":
    fail("format is %r" % meta.get("format"))

required = ["step", "vocab", "layers", "dim", "heads", "seq", "batch", "micro_batches",
            "steps", "lr", "lr_min", "warmup", "weight_decay", "clip", "beta1", "beta2",
            "eps", "seed", "eval_every", "tp", "pp", "dp"]
for k in required:
    if k not in meta:
        fail("__metadata__ lacks %r" % k)
ints = {}
for k in required:
    if k in meta and k not in ("lr", "lr_min", "weight_decay", "clip", "beta1", "beta2", "eps"):
        try:
            ints[k] = int(meta[k], 10)
        except (TypeError, ValueError):
            fail("__metadata__[%r] = %r is not an integer" % (k, meta[k]))
for k in ("lr", "lr_min", "weight_decay", "clip", "beta1", "beta2", "eps"):
    if k in meta:
        try:
            if not math.isfinite(float(meta[k])):
                raise ValueError
        except (TypeError, ValueError):
            fail("__metadata__[%r] = %r is not a finite number" % (k, meta[k]))

# --- tensor entries: F32, integer shapes, offsets matching the shapes ---
def is_uint(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0

entries = []
for name, ent in header.items():
    if not isinstance(ent, dict):
        fail("entry %r is not an object" % name); continue
    if ent.get("dtype") != "F32":
        fail("%s: dtype %r" % (name, ent.get("dtype")))
    shape, offs = ent.get("shape"), ent.get("data_offsets")
    if not (isinstance(shape, list) and all(is_uint(d) for d in shape)):
        fail("%s: bad shape %r" % (name, shape)); continue
    if not (isinstance(offs, list) and len(offs) == 2 and all(is_uint(o) for o in offs)
            and offs[0] <= offs[1]):
        fail("%s: bad data_offsets %r" % (name, offs)); continue
    numel = 1
    for d in shape:
        numel *= d
    if offs[1] - offs[0] != 4 * numel:
        fail("%s: offsets %r do not hold shape %r" % (name, offs, shape))
    entries.append((offs[0], offs[1], name, shape))
if errors:
    finish()

# contiguous, no holes, covering the data section exactly
entries.sort()
pos = 0
for begin, end, name, _ in entries:
    if begin != pos:
        fail("%s starts at %d, expected %d (hole or overlap)" % (name, begin, pos))
    pos = end
if pos != len(data):
    fail("tensors cover %d bytes, the data section has %d" % (pos, len(data)))

# weights first, then optim.m.<each>, then optim.v.<each>, same order and shapes
order = [n for _, _, n, _ in entries]
shapes = {n: s for _, _, n, s in entries}
weights = [n for n in order if not n.startswith("optim.")]
want = weights + ["optim.m." + n for n in weights] + ["optim.v." + n for n in weights]
if order != want:
    fail("tensor order is not weights, optim.m.*, optim.v.* in one table order")
for n in weights:
    for p in ("optim.m.", "optim.v."):
        if p + n in shapes and shapes[p + n] != shapes[n]:
            fail("%s%s has shape %r, %s has %r" % (p, n, shapes[p + n], n, shapes[n]))

# one CRC-32 per tensor, 8 lowercase hex digits, over the tensor's raw bytes
for begin, end, name, _ in entries:
    stored = meta.get("crc32." + name)
    got = "%08x" % (zlib.crc32(data[begin:end]) & 0xFFFFFFFF)
    if stored is None:
        fail("no crc32.%s in __metadata__" % name)
    elif stored != got:
        fail("crc32.%s is %r, the data gives %r" % (name, stored, got))
for k in meta:
    if k.startswith("crc32.") and k[6:] not in shapes:
        fail("%s names no tensor" % k)

V, C = ints.get("vocab"), ints.get("dim")
for n in ("tok_emb.weight", "lm_head.weight"):
    if n in shapes and shapes[n] != [V, C]:
        fail("%s has shape %r, expected [vocab, dim] = [%s, %s]" % (n, shapes[n], V, C))

def floats(name):
    for begin, end, n, _ in entries:
        if n == name:
            return struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])

# --- a fresh checkpoint of the program: the model of doc/design.md section 4 ---
if mode == "program" and not errors:
    L, T = ints["layers"], ints["seq"]
    if V != 256:
        fail("vocab is %d, expected 256 (bytes)" % V)
    model = {"tok_emb.weight": [V, C], "pos_emb.weight": [T, C],
             "ln_f.weight": [C], "ln_f.bias": [C], "lm_head.weight": [V, C]}
    for i in range(L):
        b = "blocks.%d." % i
        for ln in ("ln1", "ln2"):
            model[b + ln + ".weight"] = [C]
            model[b + ln + ".bias"] = [C]
        for x in ("q", "k", "v", "proj"):
            model[b + "attn." + x + ".weight"] = [C, C]
            model[b + "attn." + x + ".bias"] = [C]
        model[b + "mlp.fc1.weight"] = [4 * C, C]
        model[b + "mlp.fc1.bias"] = [4 * C]
        model[b + "mlp.fc2.weight"] = [C, 4 * C]
        model[b + "mlp.fc2.bias"] = [C]
    have = {n: shapes[n] for n in weights}
    for n in sorted(set(model) - set(have)):
        fail("tensor %s is missing" % n)
    for n in sorted(set(have) - set(model)):
        fail("unexpected tensor %s" % n)
    for n in sorted(set(model) & set(have)):
        if have[n] != model[n]:
            fail("%s has shape %r, design.md says %r" % (n, have[n], model[n]))
    # --steps 0: nothing trained yet
    if meta.get("step") != "0":
        fail("step is %r after --steps 0" % meta.get("step"))
    for n in weights:
        w = floats(n)
        if not all(math.isfinite(x) for x in w):
            fail("%s holds non-finite values" % n)
        if n.endswith(".bias") and any(w):
            fail("%s is not zero at initialisation" % n)
        if (".ln" in n or n.startswith("ln_f.")) and n.endswith(".weight") and \
                any(x != 1.0 for x in w):
            fail("%s is not one at initialisation" % n)
        for p in ("optim.m.", "optim.v."):
            if any(floats(p + n)):
                fail("%s%s is not zero before the first step" % (p, n))

finish()
EOF
