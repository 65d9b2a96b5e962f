#!/usr/bin/env python3
"""Summarise cuco timeline files (tools/cupti/cuco_timeline.c, one JSON
object a line): for each kernel name and copy kind, per rank, how many ran,
the median and total time on the GPU, and the median gap between the end of
one and the start of the next record on the same stream.

usage: timeline-summary.py DIR [DIR...]   (each DIR holds timeline.*.jsonl)
"""
import glob
import json
import statistics
import sys


def load(path):
    rank, recs = None, []
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("type") == "process":
                rank = r.get("rank")
            elif r.get("type") in ("kernel", "memcpy", "memset") and "start" in r:
                recs.append(r)
    return rank, recs


def label(r):
    if r["type"] == "kernel":
        return r.get("name", "?")[:60]
    return "%s %s %d B" % (r["type"], r.get("kind", ""), r.get("bytes", 0))


def summarise(d):
    for path in sorted(glob.glob(d + "/timeline.*.jsonl")):
        rank, recs = load(path)
        by = {}
        for r in recs:
            by.setdefault(label(r), []).append((r["end"] - r["start"]) / 1e3)
        print("%s rank %s: %d records" % (d, rank, len(recs)))
        for name, us in sorted(by.items(), key=lambda kv: -sum(kv[1])):
            print("  %-62s n=%5d median %9.2f us  total %10.1f us" %
                  (name, len(us), statistics.median(us), sum(us)))


for d in sys.argv[1:]:
    summarise(d)
