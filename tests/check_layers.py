#!/usr/bin/env python3
"""check_layers.py ROOT - the dependency rules of the source tree (doc/design.md,
"Module map"), checked from the #include lines:

  1. layers: src/LAYER/*.c and include/tt/LAYER/*.h may include headers of
     their own layer and of the layers before it, never of a later one:
         core -> comm -> model -> parallel -> train -> show -> app
  2. no cycle: a module (a header and the .c files of the same name) depends on
     the modules whose headers it includes; that graph must have no cycle.
  3. MPI: outside src/comm/, only the MPI-IO checkpoint writer calls MPI's
     transfers and collectives directly (the rest goes through tt/comm/comm.h).
  4. the map: every file of src/LAYER/ has its row in doc/design.md's module map
     ("| src/LAYER/FILE |"), and the map names no file that is gone.
  5. the map's "uses" column (its last) is exactly what the file includes: the
     project headers its #include lines name and, for a .c file, those its
     public header include/tt/LAYER/NAME.h names, each as LAYER/NAME (a private
     header by its own name: "model/model_internal.h" is model/model_internal),
     without the file's own header NAME.h; sorted, "-" for none.

Prints every violation and exits 1, or prints a summary and exits 0.
"""
import os
import re
import sys

LAYERS = ["core", "comm", "model", "parallel", "train", "show", "app"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Calls that move data or synchronise; MPI_Init/Finalize/Comm_split and the
# like (setting MPI up) are not transfers.
TRANSFER = re.compile(r"\bMPI_(?:Send|Isend|Recv|Irecv|Wait\w*|Allreduce|Allgather\w*|"
                      r"Reduce\w*|Bcast|Gather\w*|Scatter\w*|Alltoall\w*|Barrier)\s*\(")
MPI_ALLOWED = ("src/comm/", "src/train/ckpt_mpiio.c")


def module_of(layer, filename):
    """A module is a header and the .c files of the same name; a private
    NAME_internal.h belongs to module NAME."""
    name = filename.rsplit(".", 1)[0]
    if name.endswith("_internal"):
        name = name[: -len("_internal")]
    return layer + "/" + name


def sources(root):
    """(path relative to root, layer, module name) of every file that counts."""
    for base in ("src", os.path.join("include", "tt")):
        for layer in LAYERS:
            d = os.path.join(root, base, layer)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if f.endswith((".c", ".h")):
                    yield os.path.join(base, layer, f), layer, module_of(layer, f)


def target(inc, layer):
    """(layer, module) an include names, or None for outside headers."""
    parts = inc.split("/")
    if len(parts) == 3 and parts[0] == "tt" and parts[1] in LAYERS:
        return parts[1], module_of(parts[1], parts[2])
    if len(parts) == 2 and parts[0] in LAYERS:      # src-private: "core/simd.h"
        return parts[0], module_of(parts[0], parts[1])
    if len(parts) == 1 and inc != "config.h":        # beside it: "outfile.h"
        return layer, module_of(layer, inc)
    return None


def header_of(inc, layer):
    """LAYER/NAME of a project header an include names (a private NAME_internal.h
    keeps its name), or None for outside headers and config.h."""
    parts = inc.split("/")
    if len(parts) == 3 and parts[0] == "tt" and parts[1] in LAYERS:
        return parts[1] + "/" + parts[2].rsplit(".", 1)[0]
    if len(parts) == 2 and parts[0] in LAYERS:
        return parts[0] + "/" + parts[1].rsplit(".", 1)[0]
    if len(parts) == 1 and inc != "config.h":
        return layer + "/" + inc.rsplit(".", 1)[0]
    return None


def uses_of(root, layer, filename):
    """The set the map's "uses" column must hold for src/LAYER/FILENAME (rule 5)."""
    name = filename.rsplit(".", 1)[0]
    paths = [os.path.join(root, "src", layer, filename)]
    if filename.endswith(".c"):
        paths.append(os.path.join(root, "include", "tt", layer, name + ".h"))
    uses = set()
    for path in paths:
        if os.path.exists(path):
            for inc in INCLUDE.findall(open(path, encoding="utf-8").read()):
                h = header_of(inc, layer)
                if h is not None:
                    uses.add(h)
    uses.discard(layer + "/" + name)
    return uses


MAP_ROW = re.compile(r"^\| src/(\w+)/([\w.]+) \|.*\| *([^|]*?) *\|\s*$", re.M)


def check_uses(root, doc, errors):
    """Rule 5; returns the number of rows checked."""
    rows = 0
    for layer, filename, cell in MAP_ROW.findall(doc):
        if not os.path.exists(os.path.join(root, "src", layer, filename)):
            continue                # rule 4 reports it
        rows += 1
        rel = "src/%s/%s" % (layer, filename)
        listed = [] if cell == "-" else [u.strip() for u in cell.split(",")]
        want = uses_of(root, layer, filename)
        missing, extra = sorted(want - set(listed)), sorted(set(listed) - want)
        if missing or extra:
            errors.append("doc/design.md's module map row %s: uses is not its #include lines: "
                          "missing %s; extra %s"
                          % (rel, ", ".join(missing) or "none", ", ".join(extra) or "none"))
        elif listed != sorted(listed) or len(listed) != len(set(listed)):
            errors.append("doc/design.md's module map row %s: uses is not sorted (or repeats "
                          "one): %s, want %s" % (rel, cell, ", ".join(sorted(want)) or "-"))
    return rows


def main(root):
    errors, edges, nfiles, nrows = [], {}, 0, 0
    for rel, layer, module in sources(root):
        nfiles += 1
        text = open(os.path.join(root, rel), encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            t = target(inc, layer)
            if t is None:
                continue
            tlayer, tmod = t
            if LAYERS.index(tlayer) > LAYERS.index(layer):
                errors.append("%s (layer %s) includes %s of the later layer %s"
                              % (rel, layer, inc, tlayer))
            if tmod != module:
                edges.setdefault(module, set()).add(tmod)
        if rel.startswith("src/") and not rel.startswith(MPI_ALLOWED):
            for m in TRANSFER.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                errors.append("%s:%d calls %s directly (use tt/comm/comm.h)"
                              % (rel, line, m.group(0).rstrip("( ")))
    design = os.path.join(root, "doc", "design.md")
    if os.path.exists(design):
        doc = open(design, encoding="utf-8").read()
        listed = set(re.findall(r"^\| src/(\w+/[\w.]+) \|", doc, re.M))
        present = {rel[len("src/"):] for rel, _, _ in sources(root) if rel.startswith("src/")}
        for f in sorted(present - listed):
            errors.append("src/%s has no row in the module map of doc/design.md" % f)
        for f in sorted(listed - present):
            errors.append("doc/design.md's module map lists src/%s, which does not exist" % f)
        nrows = check_uses(root, doc, errors)
    # Cycles: depth-first search, reporting one cycle path per back edge.
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if state.get(v) == 1:
                cyc = stack[stack.index(v):] + [v]
                errors.append("dependency cycle: " + " -> ".join(cyc))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(edges):
        if u not in state:
            visit(u)
    for e in errors:
        print("VIOLATION: " + e)
    if errors:
        return 1
    print("layers ok: %d files, %d modules, %d dependencies, no cycle, MPI only through comm, "
          "module map complete, %d rows' uses match their #include lines"
          % (nfiles, len(set(edges) | {v for s in edges.values() for v in s}),
             sum(len(s) for s in edges.values()), nrows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
