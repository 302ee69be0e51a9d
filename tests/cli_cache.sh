#!/bin/sh
# The kernel binary cache on POCL, as whole processes: the first process builds whole files and
# writes only markers; by default (CLRUN_CACHE_BUDGET 0) so does the second, POCL's own cache
# serving it; within a budget the second builds each kernel it launches in a program cut out of
# its file and writes their binaries, and the third loads every program from them; a truncated
# or damaged entry is rebuilt; CLRUN_CACHE=1 writes them all in the first process.
# Every one of these runs gives the bits of a run with the cache off (the sacred invariant).
# Run by `make check` from the build directory; CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
EXAMPLES=${srcdir:-.}/examples
make_tmp cache-test
export POCL_DEVICES=${POCL_DEVICES:-pthread}
model="$EXAMPLES/resnet_block.graph" # conv2d with its epilogue, the core's head: cut programs
# What is tested is POCL's way (other drivers write binaries at the first build): skip unless
# the device a context chooses is POCL's.
"$CLRUN" info >"$tmp/info" 2>&1
if ! awk '/^platform/ { p = $0 } /^  \* device/ { print p }' "$tmp/info" | grep -q "Portable Computing Language"; then
    echo "skip: the chosen device is not POCL's"
    exit 77
fi

checksum() { sed -n 's/^output .* checksum \([0-9a-f]*\)$/\1/p' "$1"; }

CLRUN_CACHE=0 "$CLRUN" run "$model" --repeat 1 >"$tmp/off" 2>"$tmp/err" || fail "run with the cache off: $(cat "$tmp/err")"
want=$(checksum "$tmp/off")
[ -n "$want" ] || fail "no checksum in $(cat "$tmp/off")"
cp "$tmp/off" "$tmp/rbout"

export CLRUN_CACHE_DIR="$tmp/cache"
run() { # run WHAT: one process with the cache on; its output in $tmp/out, its checksum checked
    "$CLRUN" run "$model" --repeat 1 >"$tmp/out" 2>"$tmp/err" || fail "$1: $(cat "$tmp/err")"
    got=$(checksum "$tmp/out")
    [ "$got" = "$want" ] || fail "$1: checksum $got, with the cache off $want"
}
run "first process"
ls "$tmp/cache"/*.seen >/dev/null 2>&1 || fail "first process: no marker written"
ls "$tmp/cache"/*.bin >/dev/null 2>&1 && fail "first process: a binary written (only the second writes)"
whole() { ls "$tmp/cache" | grep -Eq "^matmul_core-head-[0-9a-f]{16}\.$1\$"; } # the head's whole file
whole seen || fail "first process: the head not built whole"
# CLRUN_CACHE_BUDGET bounds the time a process spends on cuts and writes: 0 (the default),
# none; a large one, every cut kernel written at once.
unset CLRUN_CACHE_BUDGET
run "second process, default budget"
ls "$tmp/cache"/*.bin >/dev/null 2>&1 && fail "second process, default budget: a binary written"
grep -q '(0 from source' "$tmp/out" && fail "second process, default budget: nothing built from source"
export CLRUN_CACHE_BUDGET=0
run "second process, budget 0"
ls "$tmp/cache"/*.bin >/dev/null 2>&1 && fail "second process, budget 0: a binary written"
export CLRUN_CACHE_BUDGET=1000
run "second process"
ls "$tmp/cache"/*.bin >/dev/null 2>&1 || fail "second process: no binary written"
ls "$tmp/cache"/matmul_core-head-clrun_conv_pad-*.bin >/dev/null 2>&1 || fail "second process: the head's kernels not cut out"
whole bin && fail "second process: the whole head written"
# Programs not cut out that hold several kernels get no binary (a binary compiles every one):
# the third process loads every binary written, and builds only those from source.
loaded() { sed -n 's/.*(\([0-9]*\) from source, \([0-9]*\) from the binary cache.*/\2/p' "$tmp/out"; }
bins=$(ls "$tmp/cache"/*.bin | wc -l)
run "third process"
[ "$(loaded)" = "$bins" ] || fail "third process: not all $bins binaries loaded: $(grep '^first' "$tmp/out")"
[ "$(ls "$tmp/cache"/*.bin | wc -l)" = "$bins" ] || fail "third process: wrote a binary"
# Damaged entries: one truncated, one with a byte flipped; rebuilt from source, same bits.
set -- "$tmp/cache"/*.bin
size=$(wc -c <"$1")
head -c $((size / 2)) "$1" >"$tmp/half" && cat "$tmp/half" >"$1"
if [ $# -ge 2 ]; then
    printf '\377\377\377\377' | dd of="$2" bs=1 seek=$(($(wc -c <"$2") - 8)) conv=notrunc 2>/dev/null
fi
run "damaged entries"
grep -q '[1-9][0-9]* from source' "$tmp/out" || fail "damaged entries: nothing rebuilt: $(grep '^first' "$tmp/out")"
run "rebuilt entries"
[ "$(loaded)" = "$bins" ] || fail "rebuilt entries: not loaded: $(grep '^first' "$tmp/out")"
# An embedded kernel file (layout.cl: transpose, concat) cut the same way, in a small graph;
# unfused (CLRUN_FUSION=0), its add and sub come from the arithmetic family's one generated
# program of four kernels (add, sub, mul, div), cut too.
export CLRUN_FUSION=0
cat >"$tmp/layout.graph" <<EOF
graph cut_layout
input x: f32[6, 8]
node t: f32[8, 6] = transpose(x) perm=[1, 0]
node c: f32[16, 6] = concat(t, t) axis=0
node s: f32[16, 6] = add(c, c)
node d: f32[16, 6] = sub(s, c)
output d
EOF
model="$tmp/layout.graph"
CLRUN_CACHE=0 "$CLRUN" run "$model" --repeat 1 >"$tmp/off" 2>"$tmp/err" || fail "layout, cache off: $(cat "$tmp/err")"
want=$(checksum "$tmp/off")
export CLRUN_CACHE_DIR="$tmp/layout"
run "layout, first process"
run "layout, second process"
ls "$tmp/layout"/layout-clrun_*.bin >/dev/null 2>&1 || fail "layout, second process: no cut kernel of layout.cl written"
ls "$tmp/layout"/ew_arith*_f32-*.bin >/dev/null 2>&1 || fail "layout, second process: no cut kernel of ew_arith_f32 (ew_arith_act_f32 on POCL) written"
run "layout, third process"
grep -q '(0 from source, [1-9][0-9]* from the binary cache' "$tmp/out" ||
    fail "layout, third process: not loaded: $(grep '^first' "$tmp/out")"
unset CLRUN_FUSION
model="$EXAMPLES/resnet_block.graph"
want=$(checksum "$tmp/rbout")

# CLRUN_CACHE=1 writes at the first build, per kernel too.
CLRUN_CACHE_DIR="$tmp/always" CLRUN_CACHE=1 "$CLRUN" run "$model" --repeat 1 >"$tmp/out" 2>"$tmp/err" ||
    fail "CLRUN_CACHE=1: $(cat "$tmp/err")"
[ "$(checksum "$tmp/out")" = "$want" ] || fail "CLRUN_CACHE=1: checksum $(checksum "$tmp/out")"
ls "$tmp/always"/*-clrun_conv_pad-*.bin >/dev/null 2>&1 || fail "CLRUN_CACHE=1: no per-kernel binary written"

[ $failures = 0 ] || exit 1
echo "cli_cache: all passed"
