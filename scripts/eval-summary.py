#!/usr/bin/env python3
"""scripts/eval-summary.py DIR: one JSON object on stdout summarizing the
'cuco eval --json' outputs that the GPU session steps leave in DIR, named
NAME-LABEL-rN.json (a timing round N) or NAME-LABEL-verify.json:
{NAME: {LABEL: [{run, round, status, time_ms, times_ms, compute_ms,
comm_ms, excerpt}, ...]}} (round: N for a timing round, None for verify;
excerpt only for failures). A file that is not JSON is listed by name
with its error."""
import glob
import json
import os
import re
import sys

d = sys.argv[1]
out = {}
files = sorted(glob.glob(os.path.join(d, "*-r[0-9]*.json")) + glob.glob(os.path.join(d, "*-verify.json")))
for f in files:
    m = re.match(r"([^-]+)-(.*)-(r(\d+)|verify)\.json$", os.path.basename(f))
    if not m:
        continue
    try:
        j = json.load(open(f))
    except Exception as e:
        out[os.path.basename(f)] = {"error": str(e)}
        continue
    met = j.get("metrics") or {}
    out.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(
        {"run": m.group(3), "round": int(m.group(4)) if m.group(4) else None, "status": j.get("status"),
         "time_ms": j.get("time_ms"), "times_ms": j.get("times_ms"), "compute_ms": met.get("compute_ms"),
         "comm_ms": met.get("comm_ms"),
         "excerpt": None if j.get("status") == "ok" else (j.get("excerpt") or "")[:400]})
json.dump(out, sys.stdout, indent=1)
