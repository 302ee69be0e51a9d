#!/bin/sh
# Host out of memory while reading inputs is out of memory: `clrun plan` of a graph (as written:
# no device, whose driver may abort on a failed allocation) and of a CSV,
# with each allocation in turn made to fail (tests/malloc_fail.c, through LD_PRELOAD), exits 0
# or 1 saying it ran out of memory; never 2 (malformed input), never a cycle, never an empty
# message. Skipped, with a line saying so, in sanitizer builds (their runtimes own malloc).
set -u
CLRUN=${CLRUN_BIN:-./clrun}
SRC=${srcdir:-.}
PRELOAD=${MALLOC_FAIL_LIB:-./tests/.libs/malloc_fail.so}
# A libtool wrapper script would count the shell's allocations too: run the program it wraps,
# with the library directory it would set.
if head -c 2 "$CLRUN" | grep -q '#!'; then
    libs=$(cd "$(dirname "$CLRUN")" && pwd)/.libs
    for real in "$libs/lt-clrun" "$libs/clrun"; do [ -x "$real" ] && break; done
    CLRUN=$real
    LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
fi
# A sanitizer's runtime is linked in (clang) or a library (gcc): look for either.
if ldd "$CLRUN" 2>/dev/null | grep -q -e libasan -e libtsan -e libubsan ||
    grep -q -a -e __asan_init -e __tsan_init -e __ubsan_handle "$CLRUN"; then
    echo "SKIP: cli_oom: a sanitizer build; malloc cannot be interposed"
    exit 77
fi
[ -f "$PRELOAD" ] || { echo "cli_oom: $PRELOAD not built" >&2; exit 99; }
tmp=${TMPDIR:-/tmp}/clrun-oom-test.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0
points=0

# check NAME ARGS...: every failure point of the command in turn.
check() {
    name=$1
    shift
    n=1
    while [ $n -lt 20000 ]; do
        CLRUN_TEST_MALLOC_FAIL=$n LD_PRELOAD=$PRELOAD "$CLRUN" "$@" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        grep -q '^malloc_fail:' "$tmp/err" || break # the command made fewer allocations: done
        points=$((points + 1))
        message=$(grep -v '^malloc_fail:' "$tmp/err")
        case "$rc" in
        0) ;; # recovered (an allocation whose failure has a fallback)
        1)
            if ! echo "$message" | grep -q -e "out of host memory" -e "Cannot allocate memory"; then
                echo "FAIL: $name, allocation $n: exit 1 without saying out of memory: '$message'" >&2
                failures=$((failures + 1))
            fi
            ;;
        *)
            echo "FAIL: $name, allocation $n: exit $rc: '$message'" >&2
            failures=$((failures + 1))
            ;;
        esac
        echo "$message" | grep -q "cycle" && {
            echo "FAIL: $name, allocation $n: reported a cycle: '$message'" >&2
            failures=$((failures + 1))
        }
        n=$((n + 1))
    done
}

check graph plan "$SRC/examples/mlp.graph" --as-written --time-limit 0
check csv plan --csv "$SRC/tests/data/traces/tiny.csv" --time-limit 0

if [ $points = 0 ]; then # an allocator the preload cannot replace (a sanitizer's, linked in)
    echo "SKIP: cli_oom: no allocation could be made to fail"
    exit 77
fi
[ $failures = 0 ] || exit 1
echo "cli_oom: $points failure points, each out of memory with a message"
