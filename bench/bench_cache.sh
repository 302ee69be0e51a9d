#!/bin/sh
# The kernel-binary cache against no cache, cold (fresh clrun and POCL caches) and warm (both
# caches filled by a previous process), for `clrun run GRAPH --repeat 1`: wall seconds of the
# whole command, the median of REPEAT processes each, and the ratios to CLRUN_CACHE=0 measured
# in the same run. A benchmark, never a test. Usage: bench/bench_cache.sh [GRAPH] [REPEAT]
set -eu
CLRUN=${CLRUN_BIN:-./clrun}
GRAPH=${1:-examples/gpt2_block.graph}
REPEAT=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

seconds() { # MODE cold|warm: one process's wall seconds
    dir="$tmp/$1"
    if [ "$2" = cold ]; then rm -rf "$dir"; fi
    mkdir -p "$dir/clrun" "$dir/pocl"
    start=$(date +%s.%N)
    CLRUN_CACHE=$1 CLRUN_CACHE_DIR="$dir/clrun" POCL_CACHE_DIR="$dir/pocl" \
        "$CLRUN" run "$GRAPH" --repeat 1 >/dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "bench_cache: $GRAPH, median of $REPEAT processes each, wall seconds of clrun run --repeat 1"
for phase in cold warm; do
    base=""
    for mode in 0 auto 1; do
        t=$(for i in $(seq "$REPEAT"); do
                [ "$phase" = warm ] && seconds "$mode" warm >/dev/null # fill both caches first
                seconds "$mode" "$phase"
            done | median)
        [ -n "$base" ] || base=$t
        printf '%-5s CLRUN_CACHE=%-4s %7.2f s  %.2fx of CLRUN_CACHE=0\n' "$phase" "$mode" "$t" \
            "$(echo "$t / $base" | bc -l)"
    done
done
