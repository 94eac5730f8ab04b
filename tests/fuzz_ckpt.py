"""fuzz_ckpt.py - checkpoint fuzzing for test_fuzz_ckpt.sh (python3 standard
library only).

    python3 fuzz_ckpt.py BASE WORKDIR [--seed N] [--jobs J] [--timeout S]
                         [--pp-every K] [--tp-every K] [--limit N]
                         [--plant good-as-bad]

Makes a few hundred mutants of BASE, a valid checkpoint written by a short
run (--save), resumes each with `$TT_BIN --resume MUTANT --steps STEP+1` on
1 rank, every K-th also on pp 2 and on tp 2 x pp 2 (--pp-every 4 plus
every valid file and bad value, --tp-every 16: a run costs MPI's start-up,
about 0.4 s of CPU per rank; mpirun from $TT_MPIRUN, every run under a
timeout), and checks what design.md section 7 promises for a hostile file:

  - no crash (a rank's exit status outside 0, 1, 2, a signal, or a crash
    report in the output) and no hang (the timeout);
  - every rank of a run ends with the same status; a refusal is one line on
    stderr (rank 0 speaks for all);
  - a mutant whose damage a check must see is refused (exit 1): a truncated
    file, any changed data byte (the per-tensor CRC-32 covers it, and the
    message says "checksum"), a changed header length, shape, data offset,
    dtype or checksum value, a missing tensor;
  - a mutant that is still a valid file (header keys reordered, two tensors'
    bytes exchanged with their checksums, extra padding or keys) is accepted;
  - a mutant accepted on 1 rank is accepted on every layout that fits it with
    the same loss line; a file fault is refused with exit 1 on every layout;
    the only other difference allowed is a layout the mutant's metadata does
    not permit (exit 2, e.g. 1 layer on pp 2). (--no-spot-check: the loss
    comparison is the check across layouts here, and the spot check's
    tolerance does not hold for every legal hyper-parameter: with beta2 = 0
    Adam's first steps are sign descent, and the sign of a gradient near
    zero depends on the order of the sums.)

The mutants follow from --seed alone, so a failure is reproduced by running
again. Prints the counts by kind and outcome; exit 0 when every check held.

--plant good-as-bad adds the unmodified BASE as a "data byte flip" that must
be refused: the checker must then report a failure (test_fuzz_ckpt.sh
expects that, proving the check can fail). $TT_BIN may also be a stand-in
that crashes, hangs or has its ranks disagree, for the same purpose.
"""
import json
import os
import random
import re
import shlex
import signal
import struct
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

HEADER_MAX = 100 * 1024 * 1024  # CKPT_HEADER_MAX of src/train/ckpt_internal.h
CRASH = re.compile(r"Segmentation|backtrace|AddressSanitizer|UndefinedBehaviorSanitizer|"
                   r"runtime error:|Aborted|core dumped|signal \d+|Signal:|"
                   r"exited on signal|MPI_ABORT|free\(\)|double free|stack smashing")
# What an accepted run trained (the first and last loss, the eval loss), or
# that it had nothing to train (a checkpoint already at --steps).
LOSS = re.compile(r"^(?:trained steps .*?: (loss .*)|(no steps to train .*))$", re.M)


# ---- the base file ------------------------------------------------------------

class Base:
    def __init__(self, path):
        self.raw = open(path, "rb").read()
        self.hlen = struct.unpack("<Q", self.raw[:8])[0]
        self.header = json.loads(self.raw[8:8 + self.hlen])
        self.data = self.raw[8 + self.hlen:]
        self.meta = self.header["__metadata__"]
        self.step = int(self.meta["step"])
        self.tensors = [k for k in self.header if k != "__metadata__"]

    def copy_header(self):
        return json.loads(json.dumps(self.header))


def frame(header, data, pad_extra=0):
    """A file from a header dict and a data section, padded like ours."""
    text = json.dumps(header, separators=(",", ":")).encode()
    pad = (8 - len(text) % 8) % 8 + pad_extra
    text += b" " * pad
    return struct.pack("<Q", len(text)) + text + data


# ---- the mutants --------------------------------------------------------------
# Each is (kind, what, bytes, expect): expect "refuse" (exit 1 on every
# layout), "accept" (exit 0) or "any" (0, 1 or 2: no crash, no hang, ranks
# agree, layouts consistent).

def mutants(base, rng):
    out = []
    size = len(base.raw)
    hend = 8 + base.hlen

    # Truncations: every boundary of the frame, then offsets spread over the file.
    cuts = {0, 1, 4, 7, 8, 9, 8 + base.hlen // 2, hend - 1, hend, hend + 1, hend + 4,
            size - 4, size - 1}
    while len(cuts) < 16:
        cuts.add(rng.randrange(hend, size))
    for c in sorted(cuts):
        out.append(("truncate", "at byte %d of %d" % (c, size), base.raw[:c], "refuse"))

    # One data byte changed: CRC-32 finds every error burst of up to 32 bits.
    for _ in range(24):
        pos = rng.randrange(len(base.data))
        x = rng.randrange(1, 256)
        d = bytearray(base.data)
        d[pos] ^= x
        out.append(("data-byte", "data byte %d ^= 0x%02x" % (pos, x),
                    base.raw[:hend] + bytes(d), "refuse"))

    # One header byte changed (JSON, names, numbers, padding): anything may
    # happen except a crash, a hang or a disagreement.
    for _ in range(26):
        pos = rng.randrange(8, hend)
        x = 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
        b = bytearray(base.raw)
        b[pos] ^= x
        out.append(("header-byte", "header byte %d ^= 0x%02x" % (pos, x), bytes(b), "any"))

    # The header length field: the data would start elsewhere, or the JSON ends
    # in the wrong place, or the length is absurd.
    for v in (0, 1, base.hlen - 1, base.hlen + 1, base.hlen - 8, base.hlen + 8,
              base.hlen * 2, size - 8, size - 7, HEADER_MAX, HEADER_MAX + 1,
              2 ** 63, 2 ** 64 - 1):
        out.append(("header-length", "length %d (was %d)" % (v, base.hlen),
                    struct.pack("<Q", v) + base.raw[8:], "refuse"))

    def with_entry(name, field, value, what, kind, expect="refuse"):
        h = base.copy_header()
        if value is None:
            del h[name][field]
        else:
            h[name][field] = value
        out.append((kind, "%s %s" % (name, what), frame(h, base.data), expect))

    # Shapes: every change of value (the model needs the exact shape).
    for _ in range(12):
        name = rng.choice(base.tensors)
        s = base.header[name]["shape"]
        choices = [("dim 0 + 1", [s[0] + 1] + s[1:]), ("dim 0 - 1", [s[0] - 1] + s[1:]),
                   ("dim 0 x 2", [s[0] * 2] + s[1:]), ("an extra dim", s + [1]),
                   ("a leading dim", [1] + s), ("last dim dropped", s[:-1]),
                   ("negative", [-s[0]] + s[1:]), ("fraction", [s[0] + 0.5] + s[1:]),
                   ("string", [str(s[0])] + s[1:]), ("2^53", [2 ** 53] + s[1:]),
                   ("2^62", [2 ** 62] + s[1:]), ("null", None), ("not a list", 16),
                   ("9 dims", [1] * 8 + s)]
        if len(s) == 2 and s[0] != s[1]:
            choices.append(("dims swapped", [s[1], s[0]]))
        what, v = rng.choice(choices)
        with_entry(name, "shape", v, "shape " + what, "shape")

    # Data offsets: moved, resized, reversed, outside the file, not integers.
    for _ in range(12):
        name = rng.choice(base.tensors)
        b0, e0 = base.header[name]["data_offsets"]
        choices = [("both + 4", [b0 + 4, e0 + 4]), ("both - 4", [b0 - 4, e0 - 4]),
                   ("end + 4", [b0, e0 + 4]), ("begin + 4", [b0 + 4, e0]),
                   ("reversed", [e0, b0]), ("past the end", [len(base.data), len(base.data) + e0 - b0]),
                   ("2^60", [2 ** 60, 2 ** 60 + e0 - b0]), ("negative", [-4, e0 - b0 - 4]),
                   ("fraction", [b0 + 0.5, e0 + 0.5]), ("three values", [b0, e0, e0]),
                   ("strings", [str(b0), str(e0)]), ("missing", None)]
        if b0 >= 4:
            choices.append(("both - 4 (inside)", [b0 - 4, e0 - 4]))
        what, v = rng.choice(choices)
        with_entry(name, "data_offsets", v, "data_offsets " + what, "data-offsets")

    # Dtypes: only F32 is ours.
    for v in ("F16", "BF16", "F64", "I32", "f32", "F32 ", "", 32, ["F32"], None, "F3"):
        name = rng.choice(base.tensors)
        with_entry(name, "dtype", v, "dtype %r" % (v,), "dtype")

    # Checksum values: a changed CRC is a mismatch, a missing or malformed
    # one is refused.
    crcs = [k for k in base.meta if k.startswith("crc32.")]
    for i in range(10):
        h = base.copy_header()
        k = rng.choice(crcs)
        old = int(h["__metadata__"][k], 16)
        if i < 5:
            h["__metadata__"][k] = "%08x" % (old ^ (1 << rng.randrange(32)))
            what = "value changed"
        else:
            h["__metadata__"][k] = ["", "%07x" % (old & 0xfffffff), "-%07x" % (old & 0xfffffff),
                                    "0x%06x" % (old & 0xffffff), None][i - 5]
            what = "now %r" % (h["__metadata__"][k],)
            if h["__metadata__"][k] is None:
                del h["__metadata__"][k]
                what = "removed"
        out.append(("checksum", "%s %s" % (k, what), frame(h, base.data), "refuse"))

    # Metadata values (the run's hyper-parameters and model): bounds,
    # non-numbers, legal but different values, a key removed.
    keys = [k for k in base.meta if not k.startswith("crc32.")]
    odd = ["", "x", "-1", "0", "1", "3", "4", "7", "64", "1e6", "1000000", "2147483648",
           "99999999999999999999", "nan", "inf", "-inf", "1e300", "1e-300", "0x10", " 3",
           "3 ", "2.5", "-0", "+2", "1e-8", "0.5", None]
    for _ in range(30):
        k = rng.choice(keys)
        v = rng.choice(odd)
        h = base.copy_header()
        if v is None:
            del h["__metadata__"][k]
        else:
            h["__metadata__"][k] = v
        out.append(("metadata", "%s = %r" % (k, v), frame(h, base.data),
                    "refuse" if k in ("format",) else "any"))
    # Values the metadata reader or the flags' ranges must refuse (issue 13
    # found beta1 1, a negative eps and lr 1e300 accepted, layers 1e6 hanging).
    for k, v in (("step", " 3"), ("lr", " 0.003"), ("layers", "2 "), ("beta1", "1"),
                 ("eps", "-1e-08"), ("lr", "1e300"), ("layers", "1000000"), ("dim", "1000000"),
                 ("batch", "100000000"), ("seq", "65536000"), ("dim", "65536"),
                 ("layers", "1024"), ("data_crc32", "1234567"), ("data_bytes", "0")):
        h = base.copy_header()
        h["__metadata__"][k] = v
        out.append(("metadata", "%s = %r" % (k, v), frame(h, base.data), "refuse"))
    for k, v in (("format", "tiny_transformer/2"), ("format", 1), ("step", 3), ("lr", None)):
        h = base.copy_header()
        h["__metadata__"][k] = v
        out.append(("metadata", "%s = %r (not a string)" % (k, v), frame(h, base.data), "refuse"))

    # The header's structure.
    h = base.copy_header()
    del h[base.tensors[-1]]
    out.append(("structure", "tensor %s removed" % base.tensors[-1], frame(h, base.data), "refuse"))
    h = base.copy_header()
    h["extra.tensor"] = {"dtype": "F32", "shape": [4], "data_offsets": [0, 20]}
    out.append(("structure", "an extra, malformed entry", frame(h, base.data), "refuse"))
    h = base.copy_header()
    del h["__metadata__"]
    out.append(("structure", "no __metadata__", frame(h, base.data), "refuse"))
    h = base.copy_header()
    h["__metadata__"] = []
    out.append(("structure", "__metadata__ a list", frame(h, base.data), "refuse"))
    out.append(("structure", "header a list", frame([], base.data), "refuse"))
    out.append(("structure", "header null", frame(None, base.data), "refuse"))
    b = bytearray(base.raw)
    b[8 + base.hlen - 1:8 + base.hlen] = b"\0"
    out.append(("structure", "a NUL in the padding", bytes(b), "any"))

    # Still valid files: these must be accepted.
    h = base.copy_header()
    keys_sorted = sorted(k for k in h)
    out.append(("valid", "header keys sorted (safetensors' order)",
                frame({k: h[k] for k in keys_sorted}, base.data), "accept"))
    out.append(("valid", "header keys reversed",
                frame({k: h[k] for k in reversed(list(h))}, base.data), "accept"))
    out.append(("valid", "8 more padding spaces", frame(base.header, base.data, 8), "accept"))
    h = base.copy_header()
    h["__metadata__"]["note"] = "an unknown key"
    h["extra.tensor"] = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    out.append(("valid", "an unknown metadata key and an extra tensor", frame(h, base.data),
                "accept"))
    # Two tensors of one kind (weights, m or v) and one shape exchange their
    # bytes, and their checksums.
    by_shape = {}
    for name in base.tensors:
        by_shape.setdefault((name[:8], tuple(base.header[name]["shape"])), []).append(name)
    pairs = [v for v in by_shape.values() if len(v) >= 2]
    for _ in range(4):
        a, b_ = rng.sample(rng.choice(pairs), 2)
        h = base.copy_header()
        h[a]["data_offsets"], h[b_]["data_offsets"] = h[b_]["data_offsets"], h[a]["data_offsets"]
        m = h["__metadata__"]
        m["crc32." + a], m["crc32." + b_] = m["crc32." + b_], m["crc32." + a]
        out.append(("valid", "%s and %s exchanged" % (a, b_), frame(h, base.data), "accept"))
    # One value changed and its checksum recomputed: the CRC vouches for the
    # bytes, so only the value checks can see a value that is no training
    # state (not finite; a negative second moment). A finite weight is fine.
    def with_value(name, index, value, what, kind, expect):
        b0, _ = base.header[name]["data_offsets"]
        d = bytearray(base.data)
        d[b0 + 4 * index:b0 + 4 * index + 4] = struct.pack("<f", value)
        h = base.copy_header()
        h["__metadata__"]["crc32." + name] = "%08x" % zlib.crc32(d[b0:base.header[name]["data_offsets"][1]])
        out.append((kind, "%s[%d] = %s, checksum updated" % (name, index, what), frame(h, bytes(d)),
                    expect))
    vs = [t for t in base.tensors if t.startswith("optim.v.")]
    for i, v in enumerate((float("nan"), float("inf"), -float("inf"), -1e-6, -1.0,
                           float("nan"))):
        name = rng.choice(vs if v < 0 else base.tensors)
        n = base.header[name]["shape"][0] * (base.header[name]["shape"] + [1])[1]
        with_value(name, rng.randrange(n), v, repr(v), "values", "refuse")
    for name in rng.sample([t for t in base.tensors if not t.startswith("optim.v.")], 2):
        with_value(name, 0, -0.25, "-0.25", "valid", "accept")
    for k, v in (("lr", "0.001"), ("seed", "7"), ("warmup", "0"), ("clip", "0"),
                 ("heads", "4"), ("batch", "8"), ("micro_batches", "1"), ("eval_every", "1")):
        h = base.copy_header()
        h["__metadata__"][k] = v
        out.append(("valid", "%s = %s" % (k, v), frame(h, base.data), "accept"))
    return out


# ---- running one mutant -------------------------------------------------------

LAYOUTS = {"np1": (1, []), "pp2": (2, ["--pp", "2"]), "tp2pp2": (4, ["--tp", "2", "--pp", "2"])}


def run(path, layout, cfg):
    """Runs the program on one mutant: (statuses per rank, stdout, stderr, secs, timed out)."""
    np_, flags = LAYOUTS[layout]
    sdir = path + "." + layout + ".status"
    os.makedirs(sdir, exist_ok=True)
    # each rank's status in a file of its own; Hydra signals the others with
    # SIGUSR1 when one exits non-zero under -disable-auto-cleanup: ignored
    wrapper = ('trap "" USR1; "$0" "$@"; s=$?; '
               'echo $s > "%s/${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"; exit $s' % sdir)
    keep_going = os.environ.get("TT_MPI_KEEP_GOING", "--mca orte_abort_on_non_zero_status 0")
    cmd = (shlex.split(cfg["mpirun"]) + shlex.split(keep_going)
           + ["-np", str(np_), "sh", "-c", wrapper, cfg["bin"]] + flags + ["--resume", path, "--steps", str(cfg["step"] + 1), "--quiet",
                      "--sample-len", "0", "--no-spot-check"])
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    hung = False
    try:
        out, err = p.communicate(timeout=cfg["timeout"])
    except subprocess.TimeoutExpired:
        hung = True
        # mpirun passes SIGTERM on to its ranks; whatever is left is killed.
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
    secs = time.time() - t0
    st = []
    for r in range(np_):
        try:
            st.append(int(open(os.path.join(sdir, str(r))).read()))
        except (OSError, ValueError):
            st.append(None)  # the rank never finished its command
    return st, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), secs, hung


def judge(m, layout, res):
    """The outcome of one run: (outcome, problem or None)."""
    kind, expect = m["kind"], m["expect"]
    st, out, err, secs, hung = res
    if hung:
        return "hang", "no end within the timeout (statuses %s)" % st
    if CRASH.search(out) or CRASH.search(err):
        return "crash", "crash report: " + CRASH.search(out + err).group(0)
    if any(s is None or s not in (0, 1, 2) for s in st):
        return "crash", "rank exit statuses %s" % st
    if len(set(st)) != 1:
        return "disagree", "ranks ended differently: statuses %s" % st
    s = st[0]
    if s == 0:
        loss = LOSS.search(out)
        if not loss:
            return "accepted", "exit 0 without a 'trained steps' line"
        m.setdefault("loss", {})[layout] = loss.group(1) or loss.group(2)
        if expect == "refuse":
            return "accepted", "accepted, but this damage must be refused"
        return "accepted", None
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1:
        return "refused", "%d lines on stderr, expected one message" % len(lines)
    m.setdefault("msg", {})[layout] = lines[0]
    if expect == "accept":
        return "refused", "refused a valid file: " + lines[0]
    if expect == "refuse" and s != 1:
        return "refused", "exit %d, a damaged file is exit 1" % s
    if kind == "data-byte" and "checksum" not in lines[0]:
        return "refused", "a changed data byte refused without a checksum message: " + lines[0]
    return "refused%d" % s, None


def main():
    a = sys.argv[1:]
    if len(a) < 2:
        sys.exit(__doc__)
    base_path, workdir = a[0], a[1]
    opts = {"--seed": "13", "--jobs": "3", "--timeout": "10", "--pp-every": "4",
            "--tp-every": "16", "--limit": "0", "--plant": ""}
    i = 2
    while i < len(a):
        if a[i] not in opts or i + 1 >= len(a):
            sys.exit("fuzz_ckpt.py: bad option %s" % a[i])
        opts[a[i]] = a[i + 1]
        i += 2
    base = Base(base_path)
    rng = random.Random(int(opts["--seed"]))
    ms = [dict(kind=k, what=w, data=d, expect=e) for k, w, d, e in mutants(base, rng)]
    if opts["--plant"] == "good-as-bad":
        ms.insert(0, dict(kind="data-byte", what="PLANTED: the unmodified file",
                          data=base.raw, expect="refuse"))
    if int(opts["--limit"]):
        ms = ms[:int(opts["--limit"])]
    cfg = {"mpirun": os.environ.get("TT_MPIRUN", "mpirun --oversubscribe"),
           "bin": os.environ["TT_BIN"], "step": base.step, "timeout": float(opts["--timeout"])}
    os.makedirs(workdir, exist_ok=True)
    pp_every, tp_every = int(opts["--pp-every"]), int(opts["--tp-every"])
    jobs = []
    for n, m in enumerate(ms):
        m["path"] = os.path.join(workdir, "m%03d.st" % n)
        with open(m["path"], "wb") as f:
            f.write(m.pop("data"))
        jobs.append((m, "np1"))
        # The mutants a run accepts, or refuses only after loading, are
        # where ranks could part ways: all of them on pp 2.
        if pp_every and (n % pp_every == 0 or m["kind"] in ("values", "valid")):
            jobs.append((m, "pp2"))
        if tp_every and n % tp_every == 0:
            jobs.append((m, "tp2pp2"))

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=int(opts["--jobs"])) as pool:
        results = list(pool.map(lambda j: run(j[0]["path"], j[1], cfg), jobs))
    wall = time.time() - t0

    problems = []
    table = {}  # (layout, kind) -> {outcome: count}
    slowest = (0.0, "")
    for (m, layout), res in zip(jobs, results):
        outcome, problem = judge(m, layout, res)
        m.setdefault("status", {})[layout] = res[0][0] if res[0] else None
        table.setdefault((layout, m["kind"]), {}).setdefault(outcome, 0)
        table[(layout, m["kind"])][outcome] += 1
        if res[3] > slowest[0]:
            slowest = (res[3], "%s on %s" % (m["what"], layout))
        if problem:
            problems.append("%s [%s, %s] on %s: %s" % (os.path.basename(m["path"]), m["kind"],
                                                       m["what"], layout, problem))
    # Layouts against each other: a file fault is one on every layout, and an
    # accepted file trains the same first step everywhere.
    for m in ms:
        s = m.get("status", {})
        one = s.get("np1")
        for layout, v in s.items():
            if layout == "np1" or v is None or one is None or v == one:
                continue
            if v == 2 and one == 0:
                continue  # the metadata's model does not fit this layout
            problems.append("%s [%s, %s]: exit %s on 1 rank but %s on %s"
                            % (os.path.basename(m["path"]), m["kind"], m["what"], one, v, layout))
        loss = m.get("loss", {})
        if "np1" in loss:
            for layout, l in loss.items():
                if l != loss["np1"]:
                    problems.append("%s [%s, %s]: %s on %s but %s on 1 rank"
                                    % (os.path.basename(m["path"]), m["kind"], m["what"], l,
                                       layout, loss["np1"]))

    outcomes = ["refused1", "refused2", "refused", "accepted", "crash", "hang", "disagree"]
    print("%-8s %-14s %6s  %s" % ("layout", "kind", "runs", "  ".join("%8s" % o for o in outcomes)))
    totals = {}
    for (layout, kind), c in sorted(table.items()):
        print("%-8s %-14s %6d  %s" % (layout, kind, sum(c.values()),
                                      "  ".join("%8d" % c.get(o, 0) for o in outcomes)))
        for o, v in c.items():
            totals.setdefault(layout, {}).setdefault(o, 0)
            totals[layout][o] += v
    for layout, c in sorted(totals.items()):
        print("%-8s %-14s %6d  %s" % (layout, "ALL", sum(c.values()),
                                      "  ".join("%8d" % c.get(o, 0) for o in outcomes)))
    print("%d mutants, %d runs (%s) in %.1f s with %s at a time; slowest run %.1f s (%s)"
          % (len(ms), len(jobs), ", ".join("%s %d" % (l, sum(c.values()))
                                           for l, c in sorted(totals.items())),
             wall, opts["--jobs"], slowest[0], slowest[1]))
    print("(refused1/refused2: exit 1 or 2 with one message; refused/accepted count "
          "here too when a check failed)")
    # The mutants whose fate is not fixed by their kind, for the record.
    for m in ms:
        s = m.get("status", {}).get("np1")
        if m["kind"] != "valid" and s in (0, 2):
            print("on 1 rank, %s: %s [%s, %s]%s" % (
                "accepted" if s == 0 else "exit 2", os.path.basename(m["path"]), m["kind"],
                m["what"], "" if s == 0 else ": " + m.get("msg", {}).get("np1", "")))
    for p in problems:
        print("PROBLEM: " + p)
    print("%d problems" % len(problems))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
