#!/bin/sh
# clrun train --devices --deterministic: the chunks of every global batch shared between several
# POCL devices of one process, their gradients summed in --deterministic's tree (tools/det_sum.c).
# At a global batch of 32 in chunks of 4 rows (8 chunks), one process, 2 devices (4 + 4 chunks)
# and 3 shares (3 + 3 + 2, device 0 listed twice) save byte-identical train states (cmp) after
# 108 steps (24 when CLRUN_TEST_ROUNDS is set below 3), every device with the same parameters;
# --resume on the devices goes on bit for bit; fewer chunks than devices and a chunk that does
# not divide the batch are refused by name. With CLRUN_TEST_ROUNDS 3 or more (the default), also:
# mpirun -np 2 saves the same bytes (where configure found MPI), per row (32 chunks: 11 + 11 +
# 10) on 3 devices and a .graph model whose batch is the chunk the same, and the deterministic
# run is the plain one within 1e-6 relative. Run by `make check`; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
if ! "$PYTHON" -c 'import sklearn' >/dev/null 2>&1; then
    echo "SKIP: $PYTHON lacks scikit-learn (apt-get install python3-sklearn)"
    exit 77
fi
make_tmp train-devices-det
# Three CPU devices, one thread each: the devices are the parallelism (CI has 2 cores).
POCL_DEVICES="pthread pthread pthread" POCL_MAX_PTHREAD_COUNT=1
export POCL_DEVICES POCL_MAX_PTHREAD_COUNT

# The digits (384 rows: 12 steps of 32) and an MLP whose batch is open (tests/train_digits.py).
digits_mlp "$tmp"

# The criterion after 100 steps (9 epochs of 12: 108); 2 epochs when CLRUN_TEST_ROUNDS
# is set below 3 (quick runs).
epochs=9
[ "${CLRUN_TEST_ROUNDS:-3}" -ge 3 ] || epochs=2
steps=$((epochs * 12))
base="$tmp/mlp.onnx --loss xent:logits --data x=$tmp/x.npy --labels $tmp/y.npy --batch 32"
base="$base --optimizer adam --lr 0.01"
det="$base --deterministic --chunk 4"

# CLRUN_TEST_ROUNDS 3 or more (the plain make check): the checks marked "more" too.
more=no
[ "${CLRUN_TEST_ROUNDS:-3}" -ge 3 ] && more=yes

# One process: the reference; (more) the plain step within 1e-6 of it.
"$CLRUN" train $det --epochs $epochs --save-state "$tmp/one.state" --save-onnx "$tmp/one.onnx" \
    >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch $epochs/$epochs" "$tmp/out" "--deterministic, one process"
if [ $more = yes ]; then
    "$CLRUN" train $base --epochs $epochs --save-onnx "$tmp/plain.onnx" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "epoch $epochs/$epochs" "$tmp/out" "plain, one process"
    same_params "$tmp/one.onnx" "$tmp/plain.onnx" "--deterministic against the plain step, $steps steps"
fi

# 2 devices (4 chunks each) and 3 shares on 2 devices (3, 3 and 2 chunks): the same bytes.
for case in "0,1 4,4 16,16" "0,1,0 3,3,2 12,12,8"; do
    set -- $case
    "$CLRUN" train $det --epochs $epochs --devices $1 --save-state "$tmp/d.state" --json \
        >"$tmp/out" 2>&1
    rc=$?
    expect 0 "\"devices\":\[$1\],\"device_batch\":\[$3\],\"device_chunks\":\[$2\]" "$tmp/out" \
        "--devices $1"
    expect 0 "\"steps\":$steps" "$tmp/out" "--devices $1"
    expect 0 '"devices_same_params":true' "$tmp/out" "--devices $1"
    cmp "$tmp/one.state" "$tmp/d.state" || fail "--devices $1: another state than one process"
done

# (more) Under mpirun -np 2, the same bytes again.
if [ $more = yes ] && [ "${HAVE_MPI:-no}" = yes ] &&
    command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
    OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none \
        OMPI_MCA_mca_base_component_disable_dlclose=1 POCL_DEVICES=pthread \
        "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -np 2 -x POCL_DEVICES \
        -x POCL_MAX_PTHREAD_COUNT "$CLRUN" train $det --epochs $epochs \
        --save-state "$tmp/m2.state" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "epoch $epochs/$epochs" "$tmp/out" "mpirun -np 2 --deterministic"
    cmp "$tmp/one.state" "$tmp/m2.state" || fail "mpirun -np 2: another state than --devices"
fi

# --resume: one epoch on the devices, then the rest, is the run of one process bit for bit.
"$CLRUN" train $det --epochs 1 --devices 0,1 --save-state "$tmp/e1.state" >/dev/null 2>&1 &&
    "$CLRUN" train $det --epochs $((epochs - 1)) --devices 0,1 --resume "$tmp/e1.state" \
        --save-state "$tmp/e2.state" >/dev/null 2>&1 || fail "--resume with --devices: failed"
cmp "$tmp/e2.state" "$tmp/one.state" || fail "--resume with --devices: other bits than one run"

graph="${srcdir:-.}/tests/data/train/digits_mlp.graph --loss xent:logits --data $tmp/x.npy"
graph="$graph --labels $tmp/y.npy --batch 64 --deterministic --epochs 1"
if [ $more = yes ]; then
    # (more) Per row (32 chunks of one row; 11, 11 and 10 on 3 devices), one epoch: the same
    # bytes.
    row="$base --deterministic --epochs 1"
    "$CLRUN" train $row --save-state "$tmp/r1.state" >"$tmp/out" 2>&1
    rc=$?
    expect 0 'epoch 1/1' "$tmp/out" "per row, one process"
    "$CLRUN" train $row --devices 0,1,2 --save-state "$tmp/r3.state" --json >"$tmp/out" 2>&1
    rc=$?
    expect 0 '"device_chunks":\[11,11,10\]' "$tmp/out" "per row, --devices 0,1,2"
    cmp "$tmp/r1.state" "$tmp/r3.state" || fail "per row, --devices 0,1,2: another state than one process"

    # (more) A .graph model (its batch fixed at 32) as the chunk of a batch of 64 on 2 devices.
    "$CLRUN" train $graph --chunk 32 --save-state "$tmp/g1.state" >"$tmp/out" 2>&1
    rc=$?
    expect 0 'epoch 1/1' "$tmp/out" ".graph, one process"
    "$CLRUN" train $graph --chunk 32 --devices 0,1 --save-state "$tmp/g2.state" >"$tmp/out" 2>&1
    rc=$?
    expect 0 'epoch 1/1' "$tmp/out" ".graph, --devices 0,1"
    cmp "$tmp/g1.state" "$tmp/g2.state" || fail ".graph, --devices 0,1: another state than one process"
fi

# Refused by name, before any work.
"$CLRUN" train $det --chunk 16 --devices 0,1,2 >"$tmp/out" 2>&1
rc=$?
expect 2 "makes 2 chunks, fewer than the 3 devices" "$tmp/out" "2 chunks on 3 devices"
"$CLRUN" train $det --chunk 5 --devices 0,1 >"$tmp/out" 2>&1
rc=$?
expect 2 "--batch 32 is no multiple of --chunk 5" "$tmp/out" "--chunk 5"
"$CLRUN" train $graph --chunk 16 --devices 0,1 >"$tmp/out" 2>&1
rc=$?
expect 2 "runs the model on chunks of 16 rows" "$tmp/out" ".graph of another batch than the chunk"

exit $((failures > 0))
