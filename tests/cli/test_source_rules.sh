#!/usr/bin/env bash
# test_source_rules.sh: the rules of the C sources that a review would
# otherwise have to catch: no banned function (the unbounded or unchecked
# ones: atoi, atof, atol, sprintf, vsprintf, strcpy, strcat, gets, strtok,
# whose safe forms are strtol/strtod through cuco/num.h, snprintf or
# cuco_sprintf, cuco_buf, strtok_r) and the format of .clang-format
# (clang-format --dry-run finds nothing to change), and no function of
# src/ longer than 150 lines (a definition's opening brace at column 0 to
# its closing one, as the Linux brace style writes them). The sources are
# src/, include/ and tools/.
set -euo pipefail
: "${CUCO_SRC:?CUCO_SRC not set}"
cd "$CUCO_SRC"
fail() { echo "FAIL: $*" >&2; exit 1; }

mapfile -t files < <(ls src/*/*.c src/*/*.h include/cuco/*.h tools/*.c tools/*/*.c 2>/dev/null)
[ "${#files[@]}" -gt 50 ] || fail "found only ${#files[@]} source files"

# A banned call: the name as a whole word followed by '(' (cuco_sprintf and
# snprintf are other words). Comments and strings are not told apart: name
# such a function otherwise there.
banned='\b(atoi|atof|atol|atoll|sprintf|vsprintf|strcpy|strcat|gets|strtok)[[:space:]]*\('
if grep -nE "$banned" "${files[@]}"; then
    fail "banned functions above (use strtol/strtod via cuco/num.h, snprintf, cuco_sprintf, cuco_buf, strtok_r)"
fi
# the check itself must see a banned call when there is one
probe=$(mktemp)
trap 'rm -f "$probe"' EXIT
printf 'int f(const char *s) { return atoi(s); }\n' > "$probe"
grep -qE "$banned" "$probe" || fail "the banned-function pattern does not match a call of atoi"

# Function length: awk counts from a '{' at column 0 to the next '}' there.
longest() { # files... -> "LINES FILE:LINE" of each function over MAX_FN_LINES
    awk -v max="$MAX_FN_LINES" '
        FNR == 1 { start = 0 }
        /^\{/ { start = FNR }
        /^\}/ && start { if (FNR - start + 1 > max) print FNR - start + 1, FILENAME ":" start; start = 0 }
    ' "$@"
}
MAX_FN_LINES=150
long=$(longest src/*/*.c)
[ -z "$long" ] || fail "functions over $MAX_FN_LINES lines (split them): $long"
# the check itself must see a long function when there is one
{ echo 'int f(void)'; echo '{'; for i in $(seq 160); do echo '    g();'; done; echo '}'; } > "$probe"
[ -n "$(longest "$probe")" ] || fail "the function-length check misses a 162-line function"

if ! command -v clang-format >/dev/null; then
    echo "skip: clang-format is not installed (scripts/setup installs it)"
    exit 77
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2> "$probe"; then
    head -40 "$probe" >&2
    fail "clang-format would change the files above: run clang-format -i on them"
fi
echo "source rules: ${#files[@]} files, no banned function, no function over $MAX_FN_LINES lines, formatted"
