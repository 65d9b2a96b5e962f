#!/usr/bin/env bash
# test_produce_plan.sh: the producer split's ranges (device/produce_plan.cuh,
# host C++) on synthetic outputs: every unit in one range, in order for an
# all-reduce, step by step over the ranks' parts for a reduce-scatter where
# the ranges and units divide among them (and recognized as such), in order
# otherwise. Built with the host C++ compiler; needs no GPU.
set -u
SRC=${CUCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null || { echo "skip: no C++ compiler ($CXX)"; exit 77; }
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/produceplan.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$CXX" -std=c++17 -Wall -Wextra -Werror -fsanitize=address,undefined -I"$SRC/device" \
    -o "$T/produce_plan_test" "$SRC/tests/cli/produce_plan_test.cc" || { echo "FAIL: build"; exit 1; }
"$T/produce_plan_test"
