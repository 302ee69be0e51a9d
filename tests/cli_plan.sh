#!/bin/sh
# clrun plan --capacity from the command line: a plan that fits (exit 0, --out written, every
# buffer under the capacity), "infeasible: proven" below the lower bound (exit 1, nothing
# written), "unknown" when the steps run out first (exit 1), the same verdicts in --json, and a
# malformed capacity as a usage error (exit 2). Step limits make every answer the same on any
# machine. Run by `make check` from the build directory; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
make_tmp plan-test

# perfect:150:2 packs exactly into 4 * 150 granules of 256 B: its optimum is 153600 bytes.
steps="--step-limit 200000 --time-limit 3600"
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153600 --out "$tmp/fits.csv" >"$tmp/out" 2>&1
rc=$?
expect 0 "the plan fits" "$tmp/out" "capacity at the optimum"
[ -s "$tmp/fits.csv" ] || fail "capacity at the optimum: --out not written"
# id,lower,upper,size,offset: every offset + size within the capacity
awk -F, 'NR > 1 && $5 + $4 > 153600 { bad = 1 } END { exit bad }' "$tmp/fits.csv" ||
    fail "capacity at the optimum: a buffer of --out ends above 153600"

"$CLRUN" plan --gen perfect:150:2 $steps --capacity 150K --json >"$tmp/fits.json" 2>&1
rc=$?
expect 0 '"verdict":"fits"' "$tmp/fits.json" "json, capacity 150K"
expect 0 '"capacity_bytes":153600' "$tmp/fits.json" "json, capacity 150K"

# Below the lower bound: infeasible at once, proven; --out is not written.
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153599 --out "$tmp/no.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect 1 "infeasible: proven" "$tmp/out" "capacity below the bound"
expect 1 "not written" "$tmp/err" "capacity below the bound"
[ ! -e "$tmp/no.csv" ] || fail "capacity below the bound: --out written anyway"
"$CLRUN" plan --gen perfect:150:2 $steps --capacity 153599 --json >"$tmp/no.json" 2>&1
rc=$?
expect 1 '"verdict":"infeasible"' "$tmp/no.json" "json, capacity below the bound"

# balanced:300:3 also packs into its bound (307200 B), but 50 steps are far too few to find it.
"$CLRUN" plan --gen balanced:300:3 --step-limit 50 --time-limit 3600 --capacity 307200 >"$tmp/out" 2>&1
rc=$?
expect 1 "unknown" "$tmp/out" "capacity out of reach of 50 steps"
"$CLRUN" plan --gen balanced:300:3 --step-limit 50 --time-limit 3600 --capacity 307200 --json >"$tmp/unknown.json" 2>&1
rc=$?
expect 1 '"verdict":"unknown"' "$tmp/unknown.json" "json, capacity out of reach"

# Malformed capacities are usage errors.
for bad in 0 abc -5 12Q; do
    "$CLRUN" plan --gen perfect:150:2 --capacity "$bad" >"$tmp/out" 2>&1
    rc=$?
    expect 2 "capacity" "$tmp/out" "--capacity $bad"
done

[ "$failures" = 0 ] || exit 1
echo "cli_plan: all checks passed"
