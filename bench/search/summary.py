#!/usr/bin/env python3
"""summary.py: the JSON summary of a search benchmark (planted.sh, replay.sh).

usage: summary.py NAME COMMAND DEFAULT_MS BEST_MS SEEDS EVALS WALL_S OUT SEED:MS:DONE...
  DEFAULT_MS  the exact time of the program the searches start from
  BEST_MS     the exact time of the best cell (an exhaustive sweep)
  SEED:MS:DONE  per seed: the exact time of the search's best program and
              the 'done' line of its `cuco evolve --json` (may be empty)
  OUT         also write the JSON there ('' for stdout only)
A seed's share is its gain over the best cell's (gain = default / time - 1).
"""
import json
import platform
import socket
import sys
import time


def main(argv):
    if len(argv) < 9:
        print(__doc__, file=sys.stderr)
        return 2
    name, command, default, best, seeds, evals, wall, out = argv[1:9]
    default, best = float(default), float(best)
    gain_best = default / best - 1
    runs = []
    for r in argv[9:]:
        seed, t, done = r.split(":", 2)
        t = float(t)
        done = json.loads(done) if done else {}
        share = (default / t - 1) / gain_best if gain_best > 0 else 1.0
        runs.append({"seed": int(seed), "exact_ms": t, "found_best": abs(t - best) < 1e-9,
                     "share_of_best_gain": round(share, 4),
                     "evaluations": done.get("evaluations"), "stop": done.get("stop"),
                     "retimings": done.get("retimings"), "knobs": done.get("knobs")})
    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
               if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    res = {
        "benchmark": name,
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"host": socket.gethostname(), "cpu": cpu, "platform": platform.platform()},
        "evaluations": int(evals), "seeds": int(seeds), "wall_s": int(wall),
        "default_ms": default, "best_cell_ms": best, "best_gain": round(gain_best, 4),
        "found_best": sum(r["found_best"] for r in runs),
        "mean_share": round(sum(r["share_of_best_gain"] for r in runs) / max(len(runs), 1), 4),
        "worst_share": min((r["share_of_best_gain"] for r in runs), default=0.0),
        "target": "found_best >= 19 of 20, worst_share >= 0.95",
        "runs": runs,
    }
    text = json.dumps(res, indent=1)
    print(text)
    if out:
        open(out, "w").write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
