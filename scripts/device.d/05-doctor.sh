#!/usr/bin/env bash
# What cuco sees on the GPU machine (text and JSON).
set -u
cuco doctor
cuco doctor --json > "$OUT/doctor.json"
