#!/bin/sh
# Whole models, clrun against onnxruntime (CPU) on the same machine in the same run: each .graph
# is run by `clrun run` (its median and best time per run), then written as ONNX with the same
# structure and random weights (bench/graph_to_onnx.py, Debian's python3-onnx) and timed by
# onnxruntime-node (bench/ort_time.js). onnxruntime is not a dependency: install it in a scratch
# folder outside the source tree, `npm install --ignore-scripts onnxruntime-node` (it ships its
# CPU binaries), and pass that folder. Not a test.
#
# Usage: bench/bench_models_ort.sh [--repeat N] ORT_DIR FILE.graph...   (from the source tree,
#        after `make examples`; CLRUN sets the clrun binary, default ./clrun)
set -eu
repeat=5
if [ "${1:-}" = "--repeat" ]; then
    repeat=$2
    shift 2
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [--repeat N] ORT_DIR FILE.graph..." >&2
    exit 2
fi
ort=$1
shift
here=$(dirname "$0")
clrun=${CLRUN:-./clrun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# bench_models_ort: ms per run, median (best) of $repeat after a warm-up; $(date '+%Y-%m-%d %H:%M'); load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-24s %22s %22s %12s\n' graph clrun onnxruntime "clrun/ort"
for graph in "$@"; do
    name=$(basename "$graph" .graph)
    line=$("$clrun" run "$graph" --repeat "$repeat" | grep '^time')
    median=$(echo "$line" | sed 's/^time *\([0-9.]*\) ms.*/\1/')
    best=$(echo "$line" | sed 's/.*min \([0-9.]*\).*/\1/')
    if /usr/bin/python3 "$here/graph_to_onnx.py" "$graph" "$tmp/$name.onnx" 2>"$tmp/err" &&
        times=$(NODE_PATH="$ort/node_modules" node "$here/ort_time.js" "$tmp/$name.onnx" "$repeat" 2>>"$tmp/err"); then
        ort_best=${times% *}
        ort_median=${times#* }
        ratio=$(awk -v a="$median" -v b="$ort_median" 'BEGIN { printf "%.2f", a / b }')
        printf '%-24s %12s (%7s) %12s (%7s) %12s\n' "$name" "$median" "$best" "$ort_median" "$ort_best" "${ratio}x"
    else
        printf '%-24s %12s (%7s) %22s\n' "$name" "$median" "$best" "n/a: $(head -c 60 "$tmp/err")"
    fi
    rm -f "$tmp/$name.onnx"
done
