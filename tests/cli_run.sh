#!/bin/sh
# clrun run and clrun info from the command line: configuration errors follow one rule (every
# command lists what it can and flags each invalid setting; names match in any case), sizes are
# checked against the device before anything is filled, failures name what failed, an
# unwritable trace fails before the work, and the trace's counter agrees with the peak. Run by
# `make check` from the build directory; CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
EXAMPLES=${srcdir:-.}/examples
make_tmp run-test
export POCL_DEVICES=${POCL_DEVICES:-pthread}
export CLRUN_CACHE_DIR="$tmp/cache"

# An invalid allocator: info still lists the devices, flags the variable, and exits 1, as it does
# for a device selector that matches nothing.
CLRUN_ALLOCATOR=budy "$CLRUN" info >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "CLRUN_ALLOCATOR='budy' is not valid: accepted values are buddy|" "$tmp/err" "info, bad allocator"
grep -q "device 0" "$tmp/out" || fail "info with a bad allocator lists no device"
CLRUN_DEVICE=99 "$CLRUN" info >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "CLRUN_DEVICE" "$tmp/err" "info, no such device"
grep -q "device 0" "$tmp/out" || fail "info with a bad device lists no device"
CLRUN_ALLOCATOR=budy "$CLRUN" info --env >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "budy  (invalid)" "$tmp/out" "info --env flags the value"
# The command line's own variable is listed and checked as clrun train checks it.
CLRUN_MPI_TIMEOUT=0 "$CLRUN" info --env >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "^CLRUN_MPI_TIMEOUT .* 0  (invalid)" "$tmp/out" "info --env, CLRUN_MPI_TIMEOUT=0"
grep -q "CLRUN_MPI_TIMEOUT takes seconds > 0, not '0'" "$tmp/err" || fail "info --env: no reason for CLRUN_MPI_TIMEOUT=0"
CLRUN_MPI_TIMEOUT=2.5 "$CLRUN" info >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "device 0" "$tmp/out" "info, CLRUN_MPI_TIMEOUT=2.5"

# Names in any case, in the variable and the option alike; planned through the variable too.
CLRUN_ALLOCATOR=Slab "$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"allocator": *"slab"' "$tmp/out" "CLRUN_ALLOCATOR=Slab"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --allocator PLANNED --time-limit 0 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"mode": *"planned"' "$tmp/out" "--allocator PLANNED --time-limit 0"
"$CLRUN" run "$EXAMPLES/mlp.graph" --allocator firstfit >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "unknown allocator 'firstfit': valid names are buddy|" "$tmp/err" "unknown --allocator"
# A seed is a whole number: a size's suffix is no part of one.
"$CLRUN" run "$EXAMPLES/mlp.graph" --seed 1K >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--seed takes an integer from 0 to 2^64 - 1, not '1K'" "$tmp/err" "--seed 1K"

# A tensor larger than any device allocation is refused at once, named, before any host filling.
printf 'input x: f32[8192, 1024, 1024]\nnode y = relu(x)\noutput y\n' >"$tmp/huge.graph"
"$CLRUN" run "$tmp/huge.graph" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "input 'x' is f32\[8192, 1024, 1024\] (32.00 GiB): more than the device's largest allocation" "$tmp/err" "huge input"
printf 'const w: f32[4096, 1024, 1024] ones\ninput x: f32[4]\nnode y = relu(x)\noutput y, w\n' >"$tmp/weights.graph"
"$CLRUN" run "$tmp/weights.graph" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "constant 'w' is f32\[4096, 1024, 1024\] (16.00 GiB)" "$tmp/err" "huge constant"

# Out of memory names the tensor it was for, and who holds the memory (the weights, packed
# exactly in their resident region: 2.55 MiB of the 2.64 MiB).
CLRUN_ALLOCATOR=tlsf CLRUN_POOL_LIMIT=2700K "$CLRUN" run "$EXAMPLES/mlp.graph" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "'x': out of memory: asked for 196.00 KiB" "$tmp/err" "out of memory under a pool limit"
grep -q "largest live blocks: 'w1' 1.53 MiB (executor, resident)" "$tmp/err" || fail "out of memory: holders not named: $(cat "$tmp/err")"

# An unwritable trace fails before the work, with the reason.
"$CLRUN" run "$EXAMPLES/mlp.graph" --trace "$tmp/no/such/dir/t.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "cannot write the trace '$tmp/no/such/dir/t.json': No such file or directory" "$tmp/err" "unwritable trace"
grep -q "time" "$tmp/out" && fail "unwritable trace: the graph ran anyway"

# The trace names the process and the queue, and its counter peaks at the reported peak.
"$CLRUN" run "$EXAMPLES/gpt2_block.graph" --repeat 1 --json --trace "$tmp/t.json" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"peak_bytes"' "$tmp/out" "trace run"
grep -q '"process_name"' "$tmp/t.json" || fail "trace: no process name"
grep -q '"thread_name"' "$tmp/t.json" || fail "trace: no thread name"
peak=$(sed -n 's/^ *"peak_bytes": *\([0-9]*\),*$/\1/p' "$tmp/out")
top=$(tr '{' '\n' <"$tmp/t.json" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
[ -n "$peak" ] && [ "$peak" = "$top" ] || fail "trace counter peaks at '$top', the run reports '$peak'"

# Unused donations are named (mlp.graph donates x, which no output can take), in the report and
# in --json; --strict-donation makes them an error before any run.
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "donated but taken by no output (freed after its last use): 'x'" "$tmp/out" "unused donation named"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
tr -d ' \n' <"$tmp/out" | grep -q '"unused_donated":\["x"\]' || fail "--json unused_donated: $(cat "$tmp/out")"
"$CLRUN" run "$EXAMPLES/mlp.graph" --strict-donation >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 1 "--strict-donation: input 'x' is donated, but no output can take its memory" "$tmp/err" "--strict-donation"
"$CLRUN" run "$EXAMPLES/gpt2_block.graph" --strict-donation --repeat 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "donations" "$tmp/out" "--strict-donation with nothing unused"

# The plan picture names each buffer after its tensor: as written, h1 (matmul) is a buffer; as
# it runs, relu is the matmul's epilogue, and a1 owns that buffer.
"$CLRUN" plan "$EXAMPLES/mlp.graph" --as-written --time-limit 0 --svg "$tmp/p.svg" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "<title>h1: " "$tmp/p.svg" "plan --as-written --svg tooltips"
"$CLRUN" plan "$EXAMPLES/mlp.graph" --time-limit 0 --svg "$tmp/p.svg" >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "<title>a1: " "$tmp/p.svg" "plan --svg tooltips"
grep -q "<title>buffer " "$tmp/p.svg" && fail "plan --svg: a tooltip says 'buffer N' for a graph's tensor"

# Reports say what they claim (issue 23, item 11): each fused kernel is listed with its ops, its
# node count and what it writes; --json gives the median as wall_ms and wall_ms_median, with
# wall_ms_min and wall_ms_max, and each fused group as an object; counts take the right plural.
cat >"$tmp/fuse.graph" <<'G'
graph fuse
input x: f32[4, 8]
node y: f32[4, 8] = add(x, x)
node z: f32[4, 8] = relu(y)
output z
G
"$CLRUN" run "$tmp/fuse.graph" --repeat 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "^fused       1 group, 2 nodes -> 1 kernel\$" "$tmp/out" "fused counts with plurals"
expect 0 "^            fused:add+relu: 2 nodes into one kernel, writing z\$" "$tmp/out" "the fused group listed"
expect 0 "median of 1 run;" "$tmp/out" "one run, singular"
"$CLRUN" run "$tmp/fuse.graph" --repeat 3 --json >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 '"wall_ms_median"' "$tmp/out" "--json wall_ms_median"
python3 -c "
import json, sys
d = json.load(open('$tmp/out'))
assert d['wall_ms'] == d['wall_ms_median'], d
assert d['wall_ms_min'] <= d['wall_ms_median'] <= d['wall_ms_max'], d
assert d['fused'] == [{'kernel': 'fused:add+relu', 'nodes': 2, 'output': 'z'}], d['fused']
" || fail "--json timing and fused groups: $(cat "$tmp/out")"
# info --env: every row's columns start where the header's do.
"$CLRUN" info --env >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "^CLRUN_ALLOCATOR " "$tmp/out" "info --env"
cols=$(grep -E "^(variable|CLRUN_)" "$tmp/out" | awk '{ n = split($0, c, ""); s = ""; w = 0
    for (i = 2; i <= n; i++) if (c[i] != " " && c[i - 1] == " " && c[i - 2] == " ") s = s " " i; print s }' | sort -u)
[ "$(printf '%s\n' "$cols" | wc -l)" = 1 ] || fail "info --env columns misaligned: $cols"


# --weights: the products' weights stored as f16, bf16 or int8 hold 1/2 or about 1/4 of the f32 bytes,
# and the outputs stay near the f32 run's (the report says how near); anything else is refused.
"$CLRUN" run "$EXAMPLES/gpt2_block.graph" --repeat 1 --json >"$tmp/f32" 2>"$tmp/err"; rc=$?
expect 0 '"constant_bytes"' "$tmp/f32" "gpt2 block, f32 weights"
f32_bytes=$(sed -n 's/.*"constant_bytes": *\([0-9]*\).*/\1/p' "$tmp/f32")
for w in f16 bf16 int8; do
    "$CLRUN" run "$EXAMPLES/gpt2_block.graph" --repeat 1 --weights $w --json >"$tmp/$w" 2>"$tmp/err"; rc=$?
    expect 0 "\"weights_narrowed\": *4" "$tmp/$w" "--weights $w narrows the 4 products' weights"
    bytes=$(sed -n 's/.*"constant_bytes": *\([0-9]*\).*/\1/p' "$tmp/$w")
    rel=$(sed -n 's/.*"weights_max_rel_error": *\([0-9.e+-]*\).*/\1/p' "$tmp/$w")
    case $w in
    f16) most=$((f32_bytes / 2 + 65536)); worst=0.001 ;;
    bf16) most=$((f32_bytes / 2 + 65536)); worst=0.01 ;; # 8 bits of mantissa: 2^-9 per weight
    *) most=$((f32_bytes / 4 + 65536)); worst=0.03 ;;
    esac
    [ -n "$bytes" ] && [ "$bytes" -le "$most" ] || fail "--weights $w: constant_bytes $bytes, expected at most $most (f32: $f32_bytes)"
    awk -v r="$rel" -v w="$worst" 'BEGIN { exit !(r != "" && r > 0 && r < w) }' ||
        fail "--weights $w: relative error '$rel' not in (0, $worst)"
done
"$CLRUN" run "$EXAMPLES/mlp.graph" --weights int8 --repeat 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 0 "stored as int8" "$tmp/out" "--weights int8, the report's line"
"$CLRUN" run "$EXAMPLES/mlp.graph" --weights f64 >"$tmp/out" 2>"$tmp/err"; rc=$?
expect 2 "--weights takes f16, bf16 or int8, not 'f64'" "$tmp/err" "--weights f64"

# The first run's split: a line for a person, an object in --json; with a fresh cache directory
# every program is built from source, so some build time is counted.
CLRUN_CACHE_DIR="$tmp/fresh-cache" "$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 >"$tmp/out" 2>"$tmp/err" ||
    fail "run for the first-run line"
grep -q '^first run   [0-9.]* s: load [0-9.]*, context [0-9.]*, prepare [0-9.]*, warm-up run [0-9.]*; of these program builds [0-9.]* ([1-9][0-9]* from source' "$tmp/out" ||
    fail "no first run line: $(grep '^first' "$tmp/out")"
"$CLRUN" run "$EXAMPLES/mlp.graph" --repeat 1 --json >"$tmp/out" 2>"$tmp/err" || fail "run --json for first_run"
for key in load_s context_s prepare_s run_s builds_s tune_s programs_built programs_cached; do
    tr -d ' \n' <"$tmp/out" | grep -q "\"first_run\":{[^}]*\"$key\":" || fail "--json first_run has no $key"
done

[ $failures = 0 ] || exit 1
echo "cli_run: all passed"
