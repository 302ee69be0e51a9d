#!/bin/sh
# clrun train --deterministic under mpirun (this machine's loopback, oversubscribed): one
# process, 2 and 3 ranks save byte-identical train states (cmp) after 108 steps (24 when
# CLRUN_TEST_ROUNDS is set below 3) at a global batch of 32, per row (32 chunks: 3 ranks take 11, 11 and 10) and in chunks of 4 rows (8
# chunks: 3, 3 and 2); the deterministic run is the plain one within 1e-6 relative (the same
# gradient, summed in another order); a batch of fewer chunks than ranks, a batch that is no
# multiple of the chunk, and --chunk alone are refused by name. Skipped when configure found no
# MPI or mpirun is missing. Run by `make check`; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
. "${srcdir:-.}/tests/cli_mpi_common.sh"
make_tmp train-mpi-det

# The digits (as tests/cli_train.sh makes them; 384 rows: 12 steps of 32) and an MLP whose
# batch is open, so that each rank binds its own share of it.
digits_mlp "$tmp"

# The criterion after 100 steps (9 epochs of 12: 108); 2 epochs when CLRUN_TEST_ROUNDS
# is set below 3 (quick runs).
epochs=9
[ "${CLRUN_TEST_ROUNDS:-3}" -ge 3 ] || epochs=2
steps=$((epochs * 12))
train="$tmp/mlp.onnx --loss xent:logits --data x=$tmp/x.npy --labels $tmp/y.npy --batch 32 --epochs $epochs"
train="$train --optimizer adam --lr 0.01"

# The plain step and the deterministic one, alone: the same training within 1e-6.
"$CLRUN" train $train --save-onnx "$tmp/plain.onnx" >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch $epochs/$epochs" "$tmp/out" "plain, one process"
"$CLRUN" train $train --deterministic --save-state "$tmp/s1" --save-onnx "$tmp/det.onnx" --json \
    >"$tmp/out" 2>&1
rc=$?
expect 0 "\"batch\":32,\"chunk_rows\":1,\"chunks\":32,\"epochs\":$epochs,\"steps\":$steps" "$tmp/out" \
    "--deterministic, one process"
same_params "$tmp/det.onnx" "$tmp/plain.onnx" "--deterministic, one process against the plain step, $steps steps"

# 2 and 3 ranks, per row: the same bytes. Rank 0 reports the time its reductions took, and
# its trace holds the last one after the backward pass.
for n in 2 3; do
    mpi $n "$CLRUN" train $train --deterministic --save-state "$tmp/s$n" --json \
        --trace "$tmp/trace$n.json" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "\"ranks\":$n,.*\"reduce_ms_per_step\":" "$tmp/out" "--deterministic, $n ranks"
    cmp "$tmp/s1" "$tmp/s$n" || fail "--deterministic, $n ranks: another state than one process"
    grep -q '"name":"gradient sum (gather to rank 0, broadcast)","cat":"collective"' \
        "$tmp/trace$n.json" || fail "--deterministic, $n ranks: no reduction in the trace"
done

# Chunks of 4 rows (8 chunks, 3 ranks: 3, 3 and 2 of them): the same bytes again.
"$CLRUN" train $train --deterministic --chunk 4 --save-state "$tmp/c1" >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch $epochs/$epochs" "$tmp/out" "--chunk 4, one process"
mpi 3 "$CLRUN" train $train --deterministic --chunk 4 --save-state "$tmp/c3" --json \
    >"$tmp/out" 2>&1
rc=$?
expect 0 '"rank_batch":12,"chunk_rows":4,"chunks":8' "$tmp/out" "--chunk 4, 3 ranks"
cmp "$tmp/c1" "$tmp/c3" || fail "--chunk 4, 3 ranks: another state than one process"
cmp -s "$tmp/s1" "$tmp/c1" && fail "--chunk 4: the state of chunks of 1 row (no chunking?)"

# Refused by name, before any work.
mpi 3 "$CLRUN" train $train --deterministic --chunk 16 >"$tmp/out" 2>&1
rc=$?
expect 2 "makes 2 chunks, fewer than the 3 ranks" "$tmp/out" "2 chunks on 3 ranks"
"$CLRUN" train $train --deterministic --chunk 5 >"$tmp/out" 2>&1
rc=$?
expect 2 "--batch 32 is no multiple of --chunk 5" "$tmp/out" "--chunk 5"
"$CLRUN" train $train --chunk 4 >"$tmp/out" 2>&1
rc=$?
expect 2 "--chunk is for --deterministic" "$tmp/out" "--chunk alone"

exit $((failures > 0))
