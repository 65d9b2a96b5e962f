# host_cc.sh: sourced by the tests of a host-only device/ header
# (test_lend_plan.sh, test_produce_plan.sh). host_cc_run NAME builds
# tests/cli/NAME.cc with the host C++ compiler (warnings as errors, ASan and
# UBSan, device/ on the include path) and runs it; exit 77 (skip) without a
# compiler. Needs no GPU.
host_cc_run() {
    local name=$1 src cxx
    src=${CUCO_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
    cxx=${CXX:-c++}
    command -v "$cxx" >/dev/null || { echo "skip: no C++ compiler ($cxx)"; exit 77; }
    HOST_CC_TMP=$(mktemp -d "${CUCO_TEST_TMP:-/tmp}/$name.XXXXXX")
    trap 'rm -rf "$HOST_CC_TMP"' EXIT
    "$cxx" -std=c++17 -Wall -Wextra -Werror -fsanitize=address,undefined -I"$src/device" \
        -o "$HOST_CC_TMP/$name" "$src/tests/cli/$name.cc" || { echo "FAIL: build"; exit 1; }
    "$HOST_CC_TMP/$name"
}
