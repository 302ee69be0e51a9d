#!/bin/sh
# Weights stored narrower (`clrun run --weights f16|int8`) against the f32 model, on ResNet-50
# (224x224) and BERT-base (sequence 128), both at batch 1 as examples/gen_models writes them
# (random weights). For each model and width: the resident constant bytes, the median time per run
# and its ratio to the f32 run measured in the same round (rounds alternate f32, f16, int8, so a
# loaded machine slows all three alike), the peak of the run's buffers (the constants apart: a
# narrowed weight widened before its reader is such a buffer), and the outputs' largest
# error against the f32 run (relative to the largest output value). Not a test.
#
# Usage: bench/bench_weights.sh [--repeat N] [--rounds R] [MODEL...]   (from the built source
#        tree; MODEL: resnet50, bert-base; CLRUN sets the clrun binary, default ./clrun)
set -eu
repeat=5
rounds=2
while [ $# -gt 0 ]; do
    case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "usage: $0 [--repeat N] [--rounds R] [MODEL...]" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- resnet50 bert-base
clrun=${CLRUN:-./clrun}
gen=${GEN_MODELS:-examples/gen_models}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# bench_weights: $(date '+%Y-%m-%d %H:%M'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "# each cell: median ms of $repeat runs after a warm-up, best of $rounds alternating rounds"
printf '%-10s %-5s %12s %8s %10s %9s %10s %8s %12s\n' model width "weights MiB" "x f32" "const MiB" "peak MiB" "ms/run" "x f32" "max rel err"
for model in "$@"; do
    "$gen" "$model" 1 "$tmp/$model.graph"
    for r in $(seq 1 "$rounds"); do
        for w in f32 f16 int8; do
            if [ "$w" = f32 ]; then
                "$clrun" run "$tmp/$model.graph" --repeat "$repeat" --json >"$tmp/$model.$w.$r.json"
            else
                "$clrun" run "$tmp/$model.graph" --repeat "$repeat" --weights "$w" --json \
                    >"$tmp/$model.$w.$r.json"
            fi
        done
    done
    "$py" - "$tmp" "$model" "$rounds" <<'EOF'
import json, sys
tmp, model, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {w: [json.load(open(f"{tmp}/{model}.{w}.{r}.json")) for r in range(1, rounds + 1)]
        for w in ("f32", "f16", "int8")}
best = {w: min(d["wall_ms_median"] for d in runs[w]) for w in runs}
mib = 1024.0 * 1024.0
for w in ("f32", "f16", "int8"):
    d = runs[w][0]
    weights = d.get("weights_bytes_after", 0) if w != "f32" else runs["f16"][0]["weights_bytes_before"]
    f32_weights = runs["f16"][0]["weights_bytes_before"]
    err = "-" if w == "f32" else "%.2e" % d["weights_max_rel_error"]
    print("%-10s %-5s %12.2f %8.2f %10.2f %9.2f %10.2f %8.2f %12s" % (
        model, w, weights / mib, weights / f32_weights, d["constant_bytes"] / mib,
        d["peak_bytes"] / mib, best[w], best[w] / best["f32"], err))
EOF
done
