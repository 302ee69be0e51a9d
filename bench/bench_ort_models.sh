#!/bin/sh
# Real architectures exported from PyTorch, clrun against onnxruntime (CPU, default options) in
# the same run on the same cores. The models (bench/ort_models.py: ResNet-18, MobileNetV3-small,
# EfficientNet-B0, ShuffleNetV2, SqueezeNet, an ASPP segmentation head, BERT- and GPT-style
# encoders, a ConvTranspose U-Net/DBNet decoder, a Conv1d STFT audio front-end; batch 1, random
# weights) are exported at bench time by Debian's python3-torch into a scratch folder and
# removed after. onnxruntime is not a dependency: install it in a folder outside the source tree
# (`npm install --ignore-scripts onnxruntime-node`, it ships its CPU binaries) and pass that folder.
#
# Steady state: ROUNDS rounds; in each, every model is run by `clrun run MODEL --repeat N` and
# then by onnxruntime-node (bench/ort_models.js, one warm-up then N runs), alternating, so that a
# change of load hits both. Per model the median over the rounds of each side's median, their
# ratio clrun/onnxruntime, and the geometric mean of the ratios (issue 26's floors: mean <= 1.0,
# no model above 1.5x). A loaded machine moves the times; read the ratios.
#
# Cold start, as whole processes (wall time from fork to exit; in a build tree the program that
# libtool's wrapper script would start, as installed): clrun `run MODEL --repeat 1`
# (process start, load, compile, warm-up run, one run, report, exit) with empty CLRUN_CACHE_DIR
# and POCL_CACHE_DIR (empty), the next process on the caches that one left (second: what a
# user running a model again sees), and a process after one `CLRUN_CACHE=1` process on empty
# caches (prepared: every binary written); onnxruntime's session creation + first run inside
# its process (and its whole node process). Not a test.
#
# Usage: bench/bench_ort_models.sh [--rounds R] [--repeat N] [--no-cold] ORT_DIR [MODEL...]
#        (from the build tree; CLRUN sets the clrun binary, default ./clrun; BASE another
#        clrun, e.g. a build of the main branch, timed in the same rounds as a before/after;
#        PYTHON the interpreter with torch, default /usr/bin/python3; MODEL names as in
#        ort_models.py)
set -eu
rounds=3
repeat=10
cold=yes
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --no-cold) cold=no; shift ;;
    *) break ;;
    esac
done
if [ $# -lt 1 ]; then
    echo "usage: $0 [--rounds R] [--repeat N] [--no-cold] ORT_DIR [MODEL...]" >&2
    exit 2
fi
ort=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
clrun=${CLRUN:-./clrun}
# In a build tree ./clrun is libtool's wrapper script, which spends about 0.3 s in the shell
# (sed, ls) before it starts the real program: run that program, as an installed clrun runs,
# with its own library first on the path (BASE with its own).
real_program() {
    case $1 in */*) ;; *) set -- "$(command -v "$1" || echo "$1")" ;; esac # a name on PATH
    if head -c 4096 "$1" 2>/dev/null | grep -q 'libtool wrapper' && [ -x "$(dirname "$1")/.libs/$(basename "$1")" ]; then
        echo "$(cd "$(dirname "$1")" && pwd)/.libs/$(basename "$1")"
    else
        echo "$1"
    fi
}
clrun=$(real_program "$clrun")
clrun_libs=$(dirname "$clrun")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_clrun() { env LD_LIBRARY_PATH="$clrun_libs" "$clrun" "$@"; }
if [ -n "${BASE:-}" ]; then
    BASE=$(real_program "$BASE")
    base_libs=$(dirname "$BASE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
run_base() { env LD_LIBRARY_PATH="$base_libs" "$BASE" "$@"; }
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NODE_PATH="$ort/node_modules"

now_ms() { date +%s%3N; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# bench_ort_models: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ms per run: median over $rounds alternating rounds of each side's median of $repeat runs"
"$python" "$here/ort_models.py" "$tmp" "$@" 2>"$tmp/export.err" >"$tmp/models" || {
    cat "$tmp/export.err" >&2
    exit 1
}
models=$(cut -d' ' -f1 "$tmp/models")

# Tuning is asked for once per model (CLRUN_TUNE=1), before the rounds: its choices are
# remembered in the cache directory and taken by every later run, the rounds and the warm cold
# start alike (a plain first run never tunes).
for m in $models; do
    CLRUN_TUNE=1 run_clrun run "$tmp/$m.onnx" --repeat 1 >/dev/null 2>&1 || true
done
r=1
while [ "$r" -le "$rounds" ]; do
    for m in $models; do
        if [ -n "${BASE:-}" ] && line=$(run_base run "$tmp/$m.onnx" --repeat "$repeat" 2>/dev/null | grep '^time'); then
            echo "$line" | sed 's/^time *\([0-9.]*\) ms.*/\1/' >>"$tmp/$m.base"
        fi
        if line=$(run_clrun run "$tmp/$m.onnx" --repeat "$repeat" 2>"$tmp/$m.clrun.err" | grep '^time'); then
            echo "$line" | sed 's/^time *\([0-9.]*\) ms.*/\1/' >>"$tmp/$m.clrun"
        fi
        if times=$(node "$here/ort_models.js" "$tmp/$m.onnx" "$repeat" 2>"$tmp/$m.ort.err"); then
            echo "${times#* }" >>"$tmp/$m.ort"
        fi
    done
    r=$((r + 1))
done

printf '%-16s %12s %12s %10s' model clrun_ms ort_ms clrun/ort
[ -z "${BASE:-}" ] || printf ' %12s %10s %10s' base_ms base/ort clrun/base
echo
for m in $models; do
    if [ -s "$tmp/$m.clrun" ] && [ -s "$tmp/$m.ort" ]; then
        a=$(median <"$tmp/$m.clrun")
        b=$(median <"$tmp/$m.ort")
        ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
        echo "$ratio" >>"$tmp/ratios"
        printf '%-16s %12.2f %12.2f %9sx' "$m" "$a" "$b" "$ratio"
        if [ -s "$tmp/$m.base" ]; then
            c=$(median <"$tmp/$m.base")
            awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf " %12.2f %9.2fx %9.2fx", c, c / b, a / c }'
            awk -v c="$c" -v b="$b" 'BEGIN { print c / b }' >>"$tmp/base_ratios"
        fi
        echo
    else
        printf '%-16s %s\n' "$m" "n/a: $(cat "$tmp/$m.clrun.err" "$tmp/$m.ort.err" | head -c 90 | tr '\n' ' ')"
    fi
done
if [ -s "$tmp/ratios" ]; then
    awk '{ s += log($1); n++; if ($1 > w) w = $1 } END { printf "geometric mean %.2fx over %d models, worst %.2fx\n", exp(s / n), n, w }' "$tmp/ratios"
fi
if [ -s "$tmp/base_ratios" ]; then
    awk '{ s += log($1); n++; if ($1 > w) w = $1 } END { printf "BASE: geometric mean %.2fx over %d models, worst %.2fx\n", exp(s / n), n, w }' "$tmp/base_ratios"
fi

[ "$cold" = yes ] || exit 0
echo "# cold start, whole processes, ms: clrun with empty CLRUN_CACHE_DIR+POCL_CACHE_DIR, the next"
echo "# process on those caches, and one after a CLRUN_CACHE=1 process (prepared);"
echo "# onnxruntime session creation + first run (and its whole node process)"
printf '%-16s %12s %12s %14s %14s %12s\n' model clrun_empty clrun_second clrun_prepared ort_create+run ort_process
timed_ms() { # CACHES [VAR=VALUE...]: one clrun process's wall ms on the caches under CACHES
    dir=$1
    shift
    mkdir -p "$dir/clrun" "$dir/pocl"
    t0=$(now_ms)
    env CLRUN_CACHE_DIR="$dir/clrun" POCL_CACHE_DIR="$dir/pocl" "$@" LD_LIBRARY_PATH="$clrun_libs" \
        "$clrun" run "$tmp/$m.onnx" --repeat 1 >/dev/null 2>&1 || true
    echo $(($(now_ms) - t0))
}
for m in $models; do
    empty=$(timed_ms "$tmp/cache-$m")
    second=$(timed_ms "$tmp/cache-$m")
    rm -rf "$tmp/cache-$m"
    timed_ms "$tmp/cache-$m" CLRUN_CACHE=1 >/dev/null
    prepared=$(timed_ms "$tmp/cache-$m")
    rm -rf "$tmp/cache-$m"
    t0=$(now_ms)
    o=$(node "$here/ort_models.js" "$tmp/$m.onnx" cold 2>/dev/null || echo "0 0")
    process=$(($(now_ms) - t0))
    create_run=$(echo "$o" | awk '{ printf "%.0f", $1 + $2 }')
    printf '%-16s %12s %12s %14s %14s %12s\n' "$m" "$empty" "$second" "$prepared" "$create_run" "$process"
done
