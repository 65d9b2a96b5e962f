#!/usr/bin/env python3
"""space.py: a program's knob space, for the search-against-sweep benchmark
(bench/search/replay.sh, scripts/device.d/86-search-sweep.sh).

A knob is a line '#define NAME VALUE // cuco:knob [run] V1 V2 ... [when
OTHER=V[,V] ...]' (docs/evolve.md). A knob whose conditions fail in a setting
is moot there: the program does the same whatever its value, so a setting's
cell holds every moot knob at the program's own value, as the search holds it.

  space.py knobs PROGRAM                 the knobs, as JSON
  space.py trim PROGRAM OUT [--levels NAME=V1,V2,...]... [--fix NAME=V]...
                                         a copy whose knob NAME takes only the
                                         given levels (the value in the program
                                         must be one of them), or is fixed at V
                                         (no longer a knob: a condition on it is
                                         dropped where V meets it, and a knob
                                         whose condition V fails is fixed too)
  space.py cells PROGRAM                 every distinct cell, one JSON object a
                                         line ({"NAME": "V", ...})
  space.py cell PROGRAM [NAME=V ...]     the cell of PROGRAM's own setting,
                                         changed by the NAME=V given
  space.py score TABLE PROGRAM           the table's median ms for PROGRAM's cell
  space.py table PROGRAM RUNS NAME OUT   the sweep's table: RUNS holds one JSON
                                         object a line, {"cell": {...},
                                         "time_ms": X or null, "verified": B};
                                         a cell's ms is the median of its
                                         verified times
  space.py replay TABLE DIR              a CPU workload in DIR whose time is the
                                         table's (see REPLAY_C below)
  space.py sweep PROGRAM RUNS -- LAUNCH...
                                         times every cell of PROGRAM's space:
                                         runs LAUNCH (e.g. mpirun -np 2 BIN
                                         ARGS, a build of PROGRAM whose run
                                         knobs are read as CUCO_KNOB_<NAME>)
                                         once per cell and round, appending
                                         each run to RUNS (JSON lines); rounds
                                         go in a fresh random order each;
                                         $SWEEP_CELLS (a file of cells, JSON
                                         lines: only those), $SWEEP_ROUNDS (2),
                                         $SWEEP_DEADLINE_S
                                         (no round starts a cell past it,
                                         after the first), $SWEEP_RUN_TIMEOUT_S
                                         (120)
"""
import itertools
import json
import re
import sys

KNOB_RE = re.compile(r'^#define (\w+)[ \t]+(\S+)([ \t]*)// cuco:knob\b(.*)$', re.M)


def knobs_of(text):
    """[{name, value, run, choices, when: [(NAME, {V...})]}] in program order."""
    out = []
    for m in KNOB_RE.finditer(text):
        words = m.group(4).split()
        run = bool(words) and words[0] == "run"
        words = words[1:] if run else words
        choices, when = [], []
        if "when" in words:
            at = words.index("when")
            choices, conds = words[:at], words[at + 1:]
            for c in conds:
                name, _, vals = c.partition("=")
                when.append((name, vals.split(",")))
        else:
            choices = words
        out.append({"name": m.group(1), "value": m.group(2), "run": run,
                    "choices": choices, "when": when})
    return out


def holds(knob, setting):
    """Whether knob's conditions hold in setting (a term naming no knob holds)."""
    return all(name not in setting or setting[name] in vals for name, vals in knob["when"])


def cell_of(knobs, setting):
    """setting with every moot knob at the program's own value, until nothing
    changes (a knob's condition may name a knob that is itself moot)."""
    cell = dict(setting)
    for _ in range(len(knobs) + 1):
        moot = {k["name"]: k["value"] for k in knobs if not holds(k, cell)}
        new = dict(cell, **moot)
        if new == cell:
            return cell
        cell = new
    return cell


def cell_key(cell):
    return " ".join("%s=%s" % kv for kv in sorted(cell.items()))


def all_cells(knobs):
    seen, cells = set(), []
    for values in itertools.product(*[k["choices"] for k in knobs]):
        cell = cell_of(knobs, {k["name"]: v for k, v in zip(knobs, values)})
        key = cell_key(cell)
        if key not in seen:
            seen.add(key)
            cells.append(cell)
    return cells


def program_setting(text):
    """{NAME: VALUE} of every knob of text, from its #define lines."""
    return {k["name"]: k["value"] for k in knobs_of(text)}


def trim(text, levels, fixed):
    """levels: {NAME: [V...]}; fixed: {NAME: V}. A condition on a fixed knob
    is settled: a term it meets is dropped, and a knob with a term it fails
    is moot everywhere, so it is fixed too, at its own value."""
    knobs = knobs_of(text)
    known = {k["name"] for k in knobs}
    for name in list(levels) + list(fixed):
        if name not in known:
            raise SystemExit("space.py trim: %s is not a knob of the program" % name)
    fixed = dict(fixed)
    for _ in range(len(knobs)):
        for k in knobs:
            if k["name"] not in fixed and any(n in fixed and fixed[n] not in v for n, v in k["when"]):
                fixed[k["name"]] = k["value"]

    by_name = {k["name"]: k for k in knobs}

    def edit(m):
        name, value, gap = m.group(1), m.group(2), m.group(3)
        if name in fixed:
            return "#define %s %s" % (name, fixed[name])
        if name in levels and value not in levels[name]:
            raise SystemExit("space.py trim: %s=%s is not among the levels %s" %
                             (name, value, ",".join(levels[name])))
        k = by_name[name]
        words = (["run"] if k["run"] else []) + levels.get(name, k["choices"])
        when = ["%s=%s" % (n, ",".join(v)) for n, v in k["when"] if n not in fixed]
        return "#define %s %s%s// cuco:knob %s" % (name, value, gap,
                                                   " ".join(words + (["when"] + when if when else [])))
    return KNOB_RE.sub(edit, text)


def pairs(args, flag):
    out = {}
    for a in args:
        name, eq, val = a.partition("=")
        if not eq or not val:
            raise SystemExit("space.py: %s wants NAME=VALUE, not %r" % (flag, a))
        out[name] = val
    return out


def cmd_trim(argv):
    src, dst, rest = argv[0], argv[1], argv[2:]
    levels, fixed = {}, {}
    for flag, arg in zip(rest[::2], rest[1::2]):
        if flag == "--levels":
            name, _, vals = arg.partition("=")
            levels[name] = vals.split(",")
        elif flag == "--fix":
            fixed.update(pairs([arg], flag))
        else:
            raise SystemExit("space.py trim: unknown option %s" % flag)
    open(dst, "w").write(trim(open(src).read(), levels, fixed))


def load_table(path):
    table = json.load(open(path))
    by_key = {cell_key(c["cell"]): c for c in table["cells"] if c.get("ms") is not None}
    return table, by_key


def score(table_path, program_path):
    table, by_key = load_table(table_path)
    setting = program_setting(open(program_path).read())
    cell = cell_of(table["knobs"], {k["name"]: setting[k["name"]] for k in table["knobs"]})
    hit = by_key.get(cell_key(cell))
    if hit is None:
        raise SystemExit("space.py score: %s's cell (%s) is not in the table" %
                         (program_path, cell_key(cell)))
    return hit["ms"], cell


REPLAY_C = r'''/* replay.c: a search benchmark's workload written by bench/search/space.py
 * from %(source)s. It does no work: its "time" is the measured median of
 * its knob setting's cell in that sweep, times one of the sweep's measured
 * relative deviations (a run's time over its cell's median, in the cells
 * timed more than once), drawn afresh each run. A setting outside the sweep's cells times %(outside).1f ms.
 * "--exact" prints the median itself. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// EVOLVE-BLOCK-START
%(defines)s
static void cuco_rp_setting(long long *v)
{
%(reads)s
}
// EVOLVE-BLOCK-END

#define RP_KNOBS %(nknobs)d
static const long long rp_cells[][RP_KNOBS] = {
%(cells)s
};
static const double rp_ms[] = {%(ms)s};
static const double rp_deviation[] = {%(dev)s};

static uint64_t rp_random(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12);
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    long long v[RP_KNOBS];
    cuco_rp_setting(v);
    double t = %(outside).6f;
    for (size_t i = 0; i < sizeof rp_ms / sizeof rp_ms[0]; i++)
        if (!memcmp(rp_cells[i], v, sizeof v))
            t = rp_ms[i];
    if (!(argc > 1 && !strcmp(argv[1], "--exact")))
        t *= rp_deviation[rp_random() %% (sizeof rp_deviation / sizeof rp_deviation[0])];
    printf("Verification: PASS\n");
    printf("CUCO_RESULT {\"time_ms\":%%.6f,\"iters\":1}\n", t);
    return 0;
}
'''

REPLAY_YAML = '''# %(name)s: written by bench/search/space.py replay from %(source)s; its
# time is that sweep's, with its measured noise (see replay.c).
name: %(name)s
description: "replay of a measured knob sweep (%(source)s)"
ranks: 1
gpu: false
sources: [replay.c]
evolve_file: replay.c
build:
  command: [cc, -O1, -std=c11, -D_POSIX_C_SOURCE=200809L, -o, "{out}", "{evolve_file}"]
  output: replay
  timeout_s: 30
run:
  launcher: direct
verify:
  args: []
  timeout_s: 10
bench:
  args: []
  timeout_s: 10
  repeats: 1
'''


def as_int(value):
    """A knob value as the program reads it (strtoll base 0), or an error."""
    try:
        return int(value, 0)
    except ValueError:
        try:
            return int(value, 8) if value.startswith("0") else int(value)
        except ValueError:
            raise SystemExit("space.py replay: knob value %r is not an integer" % value)


def replay(table_path, outdir):
    """Writes DIR/replay.c and DIR/workload.yaml. Every knob value must be an
    integer (run knobs are read as one). The cells are the full product of
    the levels, each with its moot knobs held (cell_of), so that the C needs
    no conditions."""
    import os
    table, by_key = load_table(table_path)
    knobs = table["knobs"]
    width = max(len(k["name"]) for k in knobs)
    defines, reads = [], []
    for i, k in enumerate(knobs):
        cond = " when " + " ".join("%s=%s" % (n, ",".join(sorted(v))) for n, v in k["when"]) \
            if k["when"] else ""
        defines.append("#define %-*s %s // cuco:knob %s%s%s" % (
            width, k["name"], k["value"], "run " if k["run"] else "", " ".join(k["choices"]), cond))
        reads.append("    v[%d] = %s;" % (i, k["name"]))
    rows, ms = [], []
    for values in itertools.product(*[k["choices"] for k in knobs]):
        setting = {k["name"]: v for k, v in zip(knobs, values)}
        hit = by_key.get(cell_key(cell_of(knobs, setting)))
        if hit is None:
            continue
        rows.append("    {%s}," % ", ".join("%dLL" % as_int(v) for v in values))
        ms.append("%.6f" % hit["ms"])
    # the noise: every run's deviation from its cell's median, in cells
    # timed more than once (a cell timed once deviates from itself by 0)
    dev = [t / c["ms"] for c in table["cells"] if len(c["times_ms"]) > 1 for t in c["times_ms"]]
    if not rows or not dev or not (table.get("program_cell") or {}).get("ms"):
        raise SystemExit("space.py replay: %s has no timed cells (or none timed twice, or the "
                         "program's own cell untimed)" % table_path)
    fields = {"source": os.path.basename(table_path), "defines": "\n".join(defines),
              "reads": "\n".join(reads), "nknobs": len(knobs), "cells": "\n".join(rows),
              "ms": ", ".join(ms), "dev": ", ".join("%.6f" % d for d in dev),
              "outside": 2 * max(float(m) for m in ms),
              "name": "replay_" + re.sub(r"\W", "_", table.get("workload", "sweep"))}
    os.makedirs(outdir, exist_ok=True)
    open(os.path.join(outdir, "replay.c"), "w").write(REPLAY_C % fields)
    open(os.path.join(outdir, "workload.yaml"), "w").write(REPLAY_YAML % fields)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else None


def table(program_path, runs_path, name, out_path):
    text = open(program_path).read()
    knobs = knobs_of(text)
    cells = {cell_key(c): {"cell": c, "times_ms": [], "failed": 0} for c in all_cells(knobs)}
    for line in open(runs_path):
        if not line.strip():
            continue
        run = json.loads(line)
        entry = cells.get(cell_key(cell_of(knobs, run["cell"])))
        if entry is None:
            raise SystemExit("space.py table: a run's cell is not in the space: %s" % run["cell"])
        if run.get("verified") and run.get("time_ms") is not None:
            entry["times_ms"].append(run["time_ms"])
        else:
            entry["failed"] += 1
    for e in cells.values():
        e["ms"] = median(e["times_ms"])
    timed = [e for e in cells.values() if e["ms"] is not None]
    own = cells.get(cell_key(cell_of(knobs, program_setting(text))))
    res = {"workload": name, "program": program_path, "knobs": json_knobs(knobs),
           "cells_in_space": len(cells), "cells_timed": len(timed),
           "program_cell": own, "best": min(timed, key=lambda e: e["ms"]) if timed else None,
           "cells": list(cells.values())}
    open(out_path, "w").write(json.dumps(res, indent=1) + "\n")


def sweep(program_path, runs_path, launch):
    import os
    import random
    import subprocess
    import time
    knobs = knobs_of(open(program_path).read())
    build_knobs = [k["name"] for k in knobs if not k["run"]]
    if build_knobs:
        raise SystemExit("space.py sweep: %s are build knobs; fix them (space.py trim --fix)" %
                         ", ".join(build_knobs))
    cells = all_cells(knobs)
    if os.environ.get("SWEEP_CELLS"):  # only these cells (JSON lines)
        wanted = {cell_key(cell_of(knobs, json.loads(line)))
                  for line in open(os.environ["SWEEP_CELLS"]) if line.strip()}
        cells = [c for c in cells if cell_key(c) in wanted]
    rounds = int(os.environ.get("SWEEP_ROUNDS", "2"))
    deadline = time.time() + float(os.environ.get("SWEEP_DEADLINE_S", "1e9"))
    limit = float(os.environ.get("SWEEP_RUN_TIMEOUT_S", "120"))
    order = random.Random(1)
    with open(runs_path, "a") as out:
        for r in range(rounds):
            order.shuffle(cells)
            for i, cell in enumerate(cells):
                if r > 0 and time.time() > deadline:
                    print("sweep: deadline in round %d after %d cells" % (r + 1, i), file=sys.stderr)
                    return
                env = dict(os.environ, **{"CUCO_KNOB_" + n: v for n, v in cell.items()})
                t0 = time.time()
                try:
                    p = subprocess.run(launch, env=env, capture_output=True, text=True,
                                       timeout=limit)
                    text, rc = p.stdout, p.returncode
                except subprocess.TimeoutExpired:
                    text, rc = "", "timeout"
                m = re.search(r'^CUCO_RESULT (\{.*\})$', text, re.M)
                result = json.loads(m.group(1)) if m else {}
                run = {"cell": cell, "round": r + 1, "rc": rc,
                       "verified": rc == 0 and "Verification: PASS" in text,
                       "time_ms": result.get("time_ms"), "wall_s": round(time.time() - t0, 2)}
                out.write(json.dumps(run) + "\n")
                out.flush()
                print("sweep: round %d cell %d/%d: %s ms %s" % (r + 1, i + 1, len(cells),
                      run["time_ms"], "verified" if run["verified"] else "NOT verified"),
                      file=sys.stderr)


def json_knobs(knobs):
    return [dict(k, when=[[n, sorted(v)] for n, v in k["when"]]) for k in knobs]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 else 2
    cmd, args = argv[1], argv[2:]
    if cmd == "knobs":
        print(json.dumps(json_knobs(knobs_of(open(args[0]).read())), indent=1))
    elif cmd == "trim":
        cmd_trim(args)
    elif cmd == "cells":
        for cell in all_cells(knobs_of(open(args[0]).read())):
            print(json.dumps(cell))
    elif cmd == "cell":
        text = open(args[0]).read()
        setting = dict(program_setting(text), **pairs(args[1:], "cell"))
        print(json.dumps(cell_of(knobs_of(text), setting)))
    elif cmd == "score":
        ms, cell = score(args[0], args[1])
        print(json.dumps({"ms": ms, "cell": cell}))
    elif cmd == "table":
        table(*args[:4])
    elif cmd == "replay":
        replay(args[0], args[1])
    elif cmd == "sweep":
        if len(args) < 4 or args[2] != "--":
            raise SystemExit("usage: space.py sweep PROGRAM RUNS -- LAUNCH...")
        sweep(args[0], args[1], args[3:])
    else:
        raise SystemExit("space.py: unknown command %s (see --help)" % cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
