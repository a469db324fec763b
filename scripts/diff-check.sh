#!/usr/bin/env bash
# Differential test of `perfskel check`: runs a reference binary (e.g. main's) and a
# candidate binary over every skeleton in the repository plus thousands of mutated
# variants of them, and compares stdout, stderr and exit code byte for byte. Used to
# show that a change to the parser or the checker (a faster simulation, say) changes
# no diagnostic.
#
#   scripts/diff-check.sh REFERENCE_BIN CANDIDATE_BIN [MUTANTS_PER_SEED] [SEED]
#
# Mutations (deterministic for a given SEED): delete, duplicate, swap or move lines;
# replace numbers, directions and peers, operations, loop counts, rank counts, tags,
# roots and communicators; insert a line taken from another skeleton. Every input is
# checked with the default budget and a sample also with small budgets (the budget
# warning and a run cut short must match too). Prints the number of inputs compared
# and, for each difference, the file and both outputs; exits 1 on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: scripts/diff-check.sh REFERENCE_BIN CANDIDATE_BIN [MUTANTS_PER_SEED] [SEED]}
cand=${2:?usage: scripts/diff-check.sh REFERENCE_BIN CANDIDATE_BIN [MUTANTS_PER_SEED] [SEED]}
per_seed=${3:-60}
seed=${4:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$ref" "$cand" "$per_seed" "$seed" "$work" <<'PY'
import os, random, re, subprocess, sys

ref, cand, per_seed, seed, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = random.Random(seed)

seeds = []
for root in ["tests/data/dsl", "examples/skeletons", "grammar"]:
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".skel"):
                seeds.append(os.path.join(dirpath, f))
seeds.sort()


def generated(phases, ranks=16, dims=(4, 4)):
    """A small version of the benchmark's skeleton (compiler/benches/large_skeleton.rs)."""
    out = ["# generated", "skeleton large", f"ranks {ranks}",
           f"topology torus({', '.join(map(str, dims))})", "app_time 3600 s", "",
           "comm row = cart_sub(world, keep = [1])", "comm col = cart_sub(world, keep = [0])", ""]
    for p in range(phases):
        size, tag, r, root = 1 + p % 64, p % 1000, p % 16, p % 4
        out += [f"# phase {p}", "loop 2 {",
                f"    compute {100 + p % 900} us working_set {size} MiB @ \"solver.f90:{p}\"",
                f"    req rw = irecv west {size} KiB tag {tag} @ \"halo.f90:10\"",
                f"    req re = irecv east {size} KiB tag {tag} @ \"halo.f90:11\"",
                f"    req sw = isend east {size} KiB tag {tag} @ \"halo.f90:12\"",
                f"    req se = isend west {size} KiB tag {tag} @ \"halo.f90:13\"",
                "    waitall rw, re, sw, se @ \"halo.f90:15\"",
                f"    sendrecv to north {size} KiB from south {size} KiB tag {tag} @ \"halo.f90:20\"",
                f"    if coord(0) % 2 == 0 and rank != {r} {{",
                "        compute uniform(10 us, 20 us)", "    } else {",
                "        compute 15 us # balance", "    }",
                f"    allreduce 8 B on row @ \"dot.f90:{p}\"", "}",
                f"bcast {size} KiB root {root} on col", ""]
    return "\n".join(out) + "\n"


texts = [(s, open(s, encoding="utf-8", errors="replace").read()) for s in seeds]
texts.append(("generated-3", generated(3)))
texts.append(("generated-6", generated(6)))
pool = [l for _, t in texts for l in t.splitlines() if l.strip()]

NUMBERS = ["0", "1", "2", "3", "4", "5", "7", "8", "15", "16", "17", "31", "64", "100", "1000",
           "65536", "99999999999", "2.5"]
DIRS = ["east", "west", "north", "south", "up", "down", "next", "prev", "parent", "hub", "any",
        "+x", "-x", "+y", "-y", "+d2", "child(0)", "child(1)", "leaf(0)", "leaf(3)", "bit(0)",
        "bit(5)", "neighbor(0)", "neighbor(2)", "offset(1, 0)", "offset(-1, 1)", "offset(1)",
        "rank(0)", "rank(1)", "rank(rank + 1)", "rank((rank + 1) % nranks)", "rank(nranks)",
        "rank(rank - 1)"]
OPS = ["send", "recv", "sendrecv", "isend", "irecv", "barrier", "bcast", "reduce", "allreduce",
       "gather", "scatter", "allgather", "alltoall", "scan", "reduce_scatter", "gatherv",
       "iallreduce", "ibcast", "ibarrier", "wait", "waitall", "waitany", "test"]
COMMS = ["world", "row", "col", "sub", "evens", "half"]
WORD = re.compile(r"\b(east|west|north|south|up|down|next|prev|parent|hub|any)\b|[+-][xyz]\b")
OPWORD = re.compile(r"\b(" + "|".join(sorted(OPS, key=len, reverse=True)) + r")\b")
NUM = re.compile(r"(?<![\w.])\d+(\.\d+)?")


def mutate(text):
    lines = text.splitlines()
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not lines:
            lines = [rng.choice(pool)]
        i = rng.randrange(len(lines))
        kind = rng.randrange(14)
        line = lines[i]
        if kind == 0:
            del lines[i]
        elif kind == 1:
            lines.insert(i, line)
        elif kind == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == 3:
            j = rng.randrange(len(lines))
            lines.insert(j, lines.pop(i))
        elif kind in (4, 5):
            nums = list(NUM.finditer(line))
            if nums:
                m = rng.choice(nums)
                lines[i] = line[:m.start()] + rng.choice(NUMBERS) + line[m.end():]
        elif kind == 6:
            dirs = list(WORD.finditer(line))
            if dirs:
                m = rng.choice(dirs)
                lines[i] = line[:m.start()] + rng.choice(DIRS) + line[m.end():]
        elif kind == 7:
            ops = list(OPWORD.finditer(line))
            if ops:
                m = rng.choice(ops)
                lines[i] = line[:m.start()] + rng.choice(OPS) + line[m.end():]
        elif kind == 8:
            lines.insert(i, rng.choice(pool))
        elif kind == 9:
            for k, l in enumerate(lines):
                if l.startswith("ranks "):
                    lines[k] = "ranks " + rng.choice(["1", "2", "3", "4", "5", "6", "8", "9", "12", "16", "32", "64"])
                    break
        elif kind == 10:
            m = re.search(r"\bloop (\S+)", line)
            if m:
                lines[i] = line[:m.start(1)] + rng.choice(["0", "1", "2", "3", "rank", "rank % 2", "nranks - rank", "1000000", "coord(0)", "rank - 1"]) + line[m.end(1):]
        elif kind == 11:
            m = re.search(r"\b(tag|root) (\S+)", line)
            if m:
                lines[i] = line[:m.start(2)] + rng.choice(["0", "1", "2", "3", "5", "15", "40000", "rank", "rank % 2", "nranks"]) + line[m.end(2):]
            elif re.search(r"\b(send|recv|isend|irecv|sendrecv)\b", line):
                lines[i] = line + " tag " + rng.choice(["1", "2", "7"])
        elif kind == 12:
            m = re.search(r"\bon (\w+)", line)
            if m:
                lines[i] = line[:m.start(1)] + rng.choice(COMMS) + line[m.end(1):]
            elif re.search(r"\b(barrier|bcast|reduce|allreduce|gather|scatter|send|recv)\b", line):
                lines[i] = line + " on " + rng.choice(COMMS)
        else:
            m = re.search(r"\bif (.*) \{", line)
            if m:
                lines[i] = line[:m.start(1)] + rng.choice(["rank == 0", "rank % 2 == 0", "rank < nranks / 2", "coord(0) == 1", "true", "rank != 3", "not (rank == 1)"]) + line[m.end(1):]
            else:
                k = rng.randrange(len(lines) + 1)
                lines.insert(k, rng.choice(["if rank == 0 {", "}", "loop 2 {", "} else {", "if rank % 2 == 1 {"]))
    return "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")


inputs = []
for name, text in texts:
    base = os.path.join(work, re.sub(r"[^\w.-]", "_", name))
    path = base + ".orig.skel"
    open(path, "w", encoding="utf-8").write(text)
    inputs.append(path)
    for k in range(per_seed):
        path = f"{base}.m{k}.skel"
        open(path, "w", encoding="utf-8").write(mutate(text))
        inputs.append(path)


def run(binary, args):
    p = subprocess.run([binary, "check"] + args, capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


compared, differences = 0, []
budgets = [[]] * 4 + [["--budget", "0"], ["--budget", "7"], ["--budget", "100"], ["--budget", "1000"]]
for start in range(0, len(inputs), 100):
    batch = inputs[start:start + 100]
    for budget in ([[]] if start % 300 else budgets[4:] + [[]]):
        if run(ref, budget + batch) == run(cand, budget + batch):
            compared += len(batch)
            continue
        for path in batch:
            a, b = run(ref, budget + [path]), run(cand, budget + [path])
            compared += 1
            if a != b:
                differences.append((path, budget, a, b))
                os.makedirs("/tmp/diff-check-failures", exist_ok=True)
                keep = os.path.join("/tmp/diff-check-failures", os.path.basename(path))
                open(keep, "wb").write(open(path, "rb").read())

print(f"diff-check: {len(inputs)} inputs ({len(texts)} seeds x {per_seed} mutants + seeds), "
      f"{compared} checks compared, {len(differences)} differences")
for path, budget, a, b in differences[:10]:
    print(f"--- {path} {' '.join(budget)} (kept in /tmp/diff-check-failures)")
    print("reference:", a[0], a[2].decode(errors="replace")[:2000])
    print("candidate:", b[0], b[2].decode(errors="replace")[:2000])
sys.exit(1 if differences else 0)
PY
