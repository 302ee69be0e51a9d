#!/bin/sh
# `clrun run --input` given what is not a data file: a device (/dev/zero, which never ends) and
# FIFOs (.npy and .pb, which would wait for a writer for ever) are refused at once with exit
# status 2, naming the file and what it is; a symbolic link to a real .npy file still reads.
# Every run is under `timeout`, so a reader that blocks or reads for ever fails the test instead
# of hanging it. CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
make_tmp cli-files

cat >"$tmp/g.graph" <<'G'
graph g
input x: f32[2]
node y: f32[2] = relu(x)
output y
G

# run_input FILE: clrun run with --input x=FILE, at most 60 s; stderr in $tmp/err, status in $rc.
run_input() {
    timeout 60 "$CLRUN" run "$tmp/g.graph" --input "x=$1" --repeat 1 >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc != 124 ] || fail "--input $1 did not finish in 60 s"
}

run_input /dev/zero
expect 2 "/dev/zero: is a character device, not a regular file" "$tmp/err" "--input /dev/zero"

mkfifo "$tmp/fifo.npy" "$tmp/fifo.pb" || exit 99
run_input "$tmp/fifo.npy"
expect 2 "fifo.npy: is a FIFO, not a regular file" "$tmp/err" "--input FIFO.npy"
run_input "$tmp/fifo.pb"
expect 2 "fifo.pb: is a FIFO, not a regular file" "$tmp/err" "--input FIFO.pb"

# A real .npy file (float32 [2]: -1, 2) through a link: the user named it, so it is followed.
printf '\223NUMPY\001\000\166\000' >"$tmp/x.npy"
printf "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" >>"$tmp/x.npy"
printf '%60s\n' '' >>"$tmp/x.npy" # header: 57 + 60 spaces + newline = 118 bytes
printf '\000\000\200\277\000\000\000\100' >>"$tmp/x.npy"
ln -s "$tmp/x.npy" "$tmp/link.npy"
run_input "$tmp/link.npy"
[ $rc = 0 ] || fail "--input through a link to a .npy file: exit $rc: $(cat "$tmp/err")"
# The model file itself: a FIFO named as the model is refused at once, as a .graph and as .onnx.
mkfifo "$tmp/fifo.graph" "$tmp/fifo.onnx" || exit 99
for model in "$tmp/fifo.graph" "$tmp/fifo.onnx"; do
    timeout 60 "$CLRUN" run "$model" >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc = 1 ] || fail "model $model (a FIFO): exit $rc, expected 1"
    grep -q "FIFO" "$tmp/err" || fail "model $model (a FIFO): '$(cat "$tmp/err")' does not say so"
done

[ $failures = 0 ]
