#!/bin/sh
# clrun replay from the command line: a small trace through every allocator, the JSON fields and
# their consistency, malformed rows as FILE:LINE: message with exit status 2, and an unknown
# allocator listing the valid names. Run by `make check` from the build directory; CLRUN_BIN
# overrides the tool (default ./clrun), srcdir (exported by the harness) locates the traces.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
TRACES=${srcdir:-.}/tests/data/traces
make_tmp replay-test

# The integer value of "key" in the pretty JSON of file $1 (json-c writes "key":value).
field() {
    sed -n "s/^ *\"$2\": *\\([0-9][0-9.e+-]*\\),*\$/\\1/p" "$1" | head -n 1
}

# tiny.csv: live bytes are 1000, 4000, 5548 (at moment 2, after buffer 0 is freed), 500, 100.
for a in buddy slab bump tlsf binned best-fit; do
    out=$tmp/$a.json
    "$CLRUN" replay --csv "$TRACES/tiny.csv" --allocator "$a" --alignment 256 --chunk-size 1M --json >"$out" 2>"$tmp/err"
    rc=$?
    if [ $rc != 0 ]; then
        fail "$a: exit status $rc ($(cat "$tmp/err"))"
        continue
    fi
    for key in allocator peak_bytes reserved_bytes footprint_bytes lower_bound_bytes ns_per_op; do
        grep -q "\"$key\"" "$out" || fail "$a: no $key in the JSON"
    done
    grep -q "\"allocator\": *\"$a\"" "$out" || fail "$a: allocator field is not $a"
    peak=$(field "$out" peak_bytes)
    reserved=$(field "$out" reserved_bytes)
    footprint=$(field "$out" footprint_bytes)
    lower=$(field "$out" lower_bound_bytes)
    [ "$lower" = 5548 ] || fail "$a: lower bound $lower, expected 5548"
    [ "${peak:-0}" -ge 5548 ] || fail "$a: peak $peak below the lower bound"
    [ "${footprint:-0}" -ge 5548 ] || fail "$a: footprint $footprint below the lower bound"
    [ "${footprint:-0}" -le "${reserved:-0}" ] || fail "$a: footprint $footprint above reserved $reserved"
    [ "${peak:-0}" -le "${reserved:-0}" ] || fail "$a: peak $peak above reserved $reserved"
done

# Buddy trims its blocks to the 256-byte atom: 3000 takes 3072 (of a 4096 block) and 500 takes
# 512, so held at moment 2 is 3072 + 512 + 2048 = 5632.
[ "$(field "$tmp/buddy.json" peak_bytes)" = 5632 ] || fail "buddy: peak held $(field "$tmp/buddy.json" peak_bytes), expected 5632"
[ "$(field "$tmp/buddy.json" internal_waste_bytes)" = 84 ] || fail "buddy: internal waste not 5632 - 5548"

# The comparison table names every allocator and the lower bound.
if "$CLRUN" replay --csv "$TRACES/tiny.csv" --alignment 256 --chunk-size 1M >"$tmp/table" 2>"$tmp/err"; then
    for a in buddy slab bump tlsf binned best-fit; do
        grep -q "^$a " "$tmp/table" || fail "table: no row for $a"
    done
    grep -q "lower bound 5.42 KiB" "$tmp/table" || fail "table: no lower bound line: $(head -n 1 "$tmp/table")"
else
    fail "table: failed ($(cat "$tmp/err"))"
fi

# Without --chunk-size and --alignment: the default device's, or 1 GiB and 256 without one.
"$CLRUN" replay --csv "$TRACES/tiny.csv" --allocator slab --json >"$tmp/dev.json" 2>"$tmp/err" ||
    fail "default device: failed ($(cat "$tmp/err"))"
[ -n "$(field "$tmp/dev.json" max_chunk_bytes)" ] || fail "default device: no max_chunk_bytes"

# A malformed row: FILE:LINE: message, exit status 2.
"$CLRUN" replay --csv "$TRACES/malformed.csv" --allocator buddy >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] || fail "malformed: exit status $rc, expected 2"
grep -q "malformed.csv:3: " "$tmp/err" || fail "malformed: no FILE:LINE: in '$(cat "$tmp/err")'"

# An unknown allocator: exit status 2 and the valid names.
"$CLRUN" replay --csv "$TRACES/tiny.csv" --allocator firstfit >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] || fail "unknown allocator: exit status $rc, expected 2"
grep -q "buddy|slab|bump|tlsf|binned|best-fit|all" "$tmp/err" || fail "unknown allocator: names not listed in '$(cat "$tmp/err")'"

# No --csv: a usage error.
"$CLRUN" replay --allocator buddy >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] || fail "no --csv: exit status $rc, expected 2"

# A buffer larger than a fixed chunk is an error (status 1) that names the buffer.
"$CLRUN" replay --csv "$TRACES/tiny.csv" --allocator buddy --alignment 256 --chunk-size 2K >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "oversized buffer: exit status $rc, expected 1"
grep -q "buffer 1 .*larger than the chunk size of 2048 bytes asked for" "$tmp/err" ||
    fail "oversized buffer: buffer or chunk size not named in '$(cat "$tmp/err")'"

# On an adversarial trace every strategy reserves less than the binned pool.
# 'all' gives {"results": [buddy, slab, bump, tlsf, binned, best-fit]}.
if "$CLRUN" replay --csv "$TRACES/growing.csv" --alignment 256 --json >"$tmp/growing.json" 2>"$tmp/err"; then
    names=$(sed -n 's/^ *"allocator": *"\([a-z-]*\)",*$/\1/p' "$tmp/growing.json" | tr '\n' ' ')
    [ "$names" = "buddy slab bump tlsf binned best-fit " ] || fail "growing: results for '$names'"
    set -- $(sed -n 's/^ *"reserved_bytes": *\([0-9]*\),*$/\1/p' "$tmp/growing.json")
    [ $# = 6 ] || fail "growing: $# reserved_bytes fields"
    for r in "$1" "$2" "$3" "$4"; do
        [ "$r" -lt "$5" ] || fail "growing: a strategy reserves $r bytes, binned $5"
    done
else
    fail "growing: failed ($(cat "$tmp/err"))"
fi

[ $failures = 0 ] || exit 1
echo "cli_replay: all checks passed"
