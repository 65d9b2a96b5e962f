#!/usr/bin/env bash
# test_lend_plan.sh: the plan of queries lent between the ranks of an
# attention split (device/lend_plan.cuh, host C++) on synthetic launches:
# who lends to whom and how many queries at 2 and 4 ranks, nothing lent
# without a mask, when a rank cannot take part or when the ranks are nearly
# even, the merge slots and the window's layout. Built with the host C++
# compiler; needs no GPU.
set -u
SRC=${CUCO_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
CXX=${CXX:-c++}
command -v "$CXX" >/dev/null || { echo "skip: no C++ compiler ($CXX)"; exit 77; }
T=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/lendplan.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$CXX" -std=c++17 -Wall -Wextra -Werror -fsanitize=address,undefined -I"$SRC/device" \
    -o "$T/lend_plan_test" "$SRC/tests/cli/lend_plan_test.cc" || { echo "FAIL: build"; exit 1; }
"$T/lend_plan_test"
