#!/bin/sh
# clrun train from the command line, on real data: scikit-learn's bundled digits (1,797 8x8
# images; a fixed split, the last 360 rows of a seeded shuffle for testing). An MLP and a small
# CNN reach at least 95 % test accuracy; a run stopped after an epoch and resumed from its saved
# state ends with the same state, bit for bit, as a run never stopped; bad labels and mismatched
# files are refused before any step (exit 2). Run by `make check`; CLRUN_BIN overrides the tool.
set -u
. "${srcdir:-.}/tests/cli_common.sh"
make_tmp train-test
PYTHON=${ONNX_PYTHON:-/usr/bin/python3}
if ! "$PYTHON" -c 'import sklearn, numpy' >/dev/null 2>&1; then
    echo "SKIP: $PYTHON lacks scikit-learn or numpy (apt-get install python3-sklearn python3-numpy)"
    exit 77
fi
data="${srcdir:-.}/tests/data/train"
"$PYTHON" - "$tmp" <<'PY' || exit 99
import sys
import numpy as np
from sklearn.datasets import load_digits
out = sys.argv[1]
d = load_digits()
x = (d.data / 16.0).astype(np.float32)
y = d.target.astype(np.int64)
p = np.random.RandomState(0).permutation(len(x))
x, y = x[p], y[p]
np.save(out + "/xtr.npy", x[:-360]); np.save(out + "/ytr.npy", y[:-360])
np.save(out + "/xte.npy", x[-360:]); np.save(out + "/yte.npy", y[-360:])
np.save(out + "/itr.npy", x[:-360].reshape(-1, 1, 8, 8)); np.save(out + "/ite.npy", x[-360:].reshape(-1, 1, 8, 8))
bad = y[:-360].copy(); bad[100] = 12
np.save(out + "/bad.npy", bad); np.save(out + "/short.npy", y[:50])
np.save(out + "/xf.npy", np.asfortranarray(x[:-360]))
PY

# test_accuracy FILE: the last line's "test_accuracy" (the --json report).
test_accuracy() {
    tail -n 1 "$1" | sed -n 's/.*"test_accuracy":\([0-9.e-]*\).*/\1/p'
}
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" \
    --test-data "$tmp/xte.npy" --test-labels "$tmp/yte.npy" --epochs 10 --lr 0.01 --json >"$tmp/mlp" 2>"$tmp/mlp.err"
rc=$?
expect 0 '"unused_donations":0' "$tmp/mlp" "digits MLP"
acc=$(test_accuracy "$tmp/mlp")
at_least "${acc:-0}" 0.95 || fail "digits MLP: test accuracy ${acc:-none} below 0.95"
grep -q 'epoch 10/10 .*test accuracy' "$tmp/mlp.err" || fail "digits MLP: no line per epoch"

# With the pool's limit at half of what the unconstrained trainer holds, the parameters and the
# optimizer state move to host memory, and the MLP trains to the same loss and test accuracy.
"$CLRUN" plan "$data/digits_mlp.graph" --budget 1G --loss xent:logits --json >"$tmp/plan" 2>&1
full=$(sed -n 's/.*"planned_peak_bytes":\([0-9]*\).*/\1/p' "$tmp/plan")
CLRUN_POOL_LIMIT=$(( ${full:-0} / 2 )) "$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits \
    --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" --test-data "$tmp/xte.npy" --test-labels "$tmp/yte.npy" \
    --epochs 10 --lr 0.01 --json >"$tmp/half" 2>"$tmp/half.err"
rc=$?
expect 0 '"host_bytes":[1-9]' "$tmp/half" "digits MLP at half its memory"
[ "$(test_accuracy "$tmp/half")" = "$acc" ] ||
    fail "digits MLP at half its memory: test accuracy $(test_accuracy "$tmp/half"), unconstrained $acc"
[ "$(sed -n 's/.*"loss":\([0-9.e-]*\).*/\1/p' "$tmp/half")" = "$(sed -n 's/.*"loss":\([0-9.e-]*\).*/\1/p' "$tmp/mlp")" ] ||
    fail "digits MLP at half its memory: another final loss"

"$CLRUN" train "$data/digits_cnn.graph" --loss xent:logits --data "$tmp/itr.npy" --labels "$tmp/ytr.npy" \
    --test-data "$tmp/ite.npy" --test-labels "$tmp/yte.npy" --epochs 10 --lr 0.01 --json >"$tmp/cnn" 2>"$tmp/cnn.err"
rc=$?
expect 0 '"unused_donations":0' "$tmp/cnn" "digits CNN"
acc=$(test_accuracy "$tmp/cnn")
at_least "${acc:-0}" 0.95 || fail "digits CNN: test accuracy ${acc:-none} below 0.95 ($(cat "$tmp/cnn.err"))"

# Two epochs at once, or one, saved, and one more resumed: the same state, bit for bit.
common="--loss xent:logits --labels $tmp/ytr.npy --optimizer sgd --lr 0.1 --momentum 0.9"
"$CLRUN" train "$data/digits_mlp.graph" --data "$tmp/xtr.npy" $common --epochs 2 --save-state "$tmp/whole" >"$tmp/out" 2>&1
rc=$?
expect 0 "donation: 8 of 8 in place" "$tmp/out" "two epochs"
"$CLRUN" train "$data/digits_mlp.graph" --data "$tmp/xtr.npy" $common --epochs 1 --save-state "$tmp/half" >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch 1/1" "$tmp/out" "first epoch"
"$CLRUN" train "$data/digits_mlp.graph" --data "$tmp/xtr.npy" $common --epochs 1 --resume "$tmp/half" --save-state "$tmp/resumed" >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch 2/2" "$tmp/out" "resumed epoch"
cmp -s "$tmp/whole" "$tmp/resumed" || fail "a resumed run ends in another state than a run never stopped"
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" \
    --resume "$tmp/half" >"$tmp/out" 2>&1
rc=$?
expect 2 "optimizer sgd, this trainer's is adam" "$tmp/out" "state of another optimizer"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --resume "$tmp/half" >"$tmp/out" 2>&1
rc=$?
expect 2 "a state of another model" "$tmp/out" "state of another model"
"$CLRUN" train "$data/digits_mlp.graph" $common --data "$tmp/xtr.npy" --resume "$tmp/no-such-state" >"$tmp/out" 2>&1
rc=$?
expect 1 "$tmp/no-such-state: cannot read" "$tmp/out" "a missing state file"

# Activations recomputed (--remat): the same state, bit for bit, and the report says so.
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --save-state "$tmp/plain" >"$tmp/out" 2>&1
rc=$?
expect 0 "epoch 1/1" "$tmp/out" "CNN without remat"
for policy in sqrt_n dots_saveable; do
    "$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --remat $policy \
        --save-state "$tmp/remat" >"$tmp/out" 2>&1
    rc=$?
    expect 0 "remat $policy: [0-9]* activations" "$tmp/out" "CNN with --remat $policy"
    cmp -s "$tmp/plain" "$tmp/remat" || fail "--remat $policy ends in another state than no remat"
done
# The trace of the last step marks the recomputed nodes' spans; without remat there are none.
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --remat sqrt_n \
    --trace "$tmp/trace.json" >"$tmp/out" 2>&1
rc=$?
expect 0 '"cat":"recompute"' "$tmp/trace.json" "a trace under --remat sqrt_n"
grep -q '"output":"r1.remat"' "$tmp/trace.json" || fail "the trace lacks the span that recomputes r1"
grep -q '"process_name".*"clrun train digits_cnn"' "$tmp/trace.json" || fail "the trace names no process"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --trace "$tmp/trace.json" >"$tmp/out" 2>&1
rc=$?
expect 0 '"cat":"kernel"' "$tmp/trace.json" "a trace without remat"
grep -q '"cat":"recompute"' "$tmp/trace.json" && fail "a step without remat has recomputed spans"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --trace /nonexistent/t.json >"$tmp/out" 2>&1
rc=$?
expect 1 "cannot write the trace '/nonexistent/t.json'" "$tmp/out" "an unwritable trace"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --remat sometimes >"$tmp/out" 2>&1
rc=$?
expect 2 "unknown policy 'sometimes'" "$tmp/out" "unknown remat policy"

# A memory budget: ample, the step as it is; too small for any policy, refused with the least
# any rewrite holds; the pool's limit as the budget, held to the byte.
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --memory-budget 1G >"$tmp/out" 2>&1
rc=$?
expect 0 "memory budget 1024.00 MiB: remat none, planned peak" "$tmp/out" "an ample budget"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --memory-budget 10K >"$tmp/out" 2>&1
rc=$?
expect 2 "a memory budget of 10.0 KiB is below the least the step can hold whatever is recomputed" "$tmp/out" "a budget nothing meets"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --memory-budget 1G --json >"$tmp/out" 2>&1
rc=$?
expect 0 '"allocator":"planned"' "$tmp/out" "a budget runs the step in planned mode"
need=$(tail -n 1 "$tmp/out" | sed -n 's/.*"planned_peak_bytes":\([0-9]*\).*/\1/p')
CLRUN_POOL_LIMIT=${need:-0} "$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 \
    --save-state "$tmp/limited" >"$tmp/out" 2>&1
rc=$?
expect 0 "fitted to the pool's limit: remat none, planned peak" "$tmp/out" "a pool limit of just what the step holds"
cmp -s "$tmp/plain" "$tmp/limited" || fail "a step fitted to the pool's limit ends in another state"
CLRUN_POOL_LIMIT=$(( ${need:-0} - 1 )) "$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" \
    --epochs 1 --save-state "$tmp/limited" >"$tmp/out" 2>&1
rc=$?
expect 0 "fitted to the pool's limit: remat per_tensor:" "$tmp/out" "a pool limit one byte short"
cmp -s "$tmp/plain" "$tmp/limited" || fail "a step with activations recomputed or moved ends in another state"
# the policy given (none): what does not fit is the state, which goes to host memory
CLRUN_POOL_LIMIT=$(( ${need:-0} - 1 )) "$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" \
    --epochs 1 --remat none --save-state "$tmp/limited" >"$tmp/out" 2>&1
rc=$?
expect 0 "in host memory (the device maps it): .* of parameters and optimizer state" "$tmp/out" "a pool limit one byte short, none given"
cmp -s "$tmp/plain" "$tmp/limited" || fail "a step with its state in host memory ends in another state"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --epochs 1 --memory-budget 200K \
    --save-state "$tmp/offloaded" >"$tmp/out" 2>&1
rc=$?
expect 0 "offloaded: [1-9][0-9]* activations to host memory and back" "$tmp/out" "a budget no recomputation alone meets, met by offload"
cmp -s "$tmp/plain" "$tmp/offloaded" || fail "a step with its activations offloaded ends in another state"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --memory-budget 160K >"$tmp/out" 2>&1
rc=$?
expect 2 "does not fit a memory budget of 160.0 KiB: at best it needs .* (remat per_tensor) whatever is recomputed or offloaded" "$tmp/out" "a budget above the least that no step meets"
CLRUN_POOL_LIMIT=64K "$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "the pool's limit of 64.0 KiB .* is below the least the step can hold" "$tmp/out" "a pool limit below the least"
"$CLRUN" train "$data/digits_cnn.graph" $common --data "$tmp/itr.npy" --memory-budget lots >"$tmp/out" 2>&1
rc=$?
expect 2 "--memory-budget takes a size" "$tmp/out" "a budget that is no size"

# The decisions without training: clrun train --plan, and clrun plan --budget.
"$CLRUN" plan "$data/digits_cnn.graph" --budget 1G --loss xent:logits >"$tmp/out" 2>&1
rc=$?
expect 0 "memory budget 1024.00 MiB: remat none; the trainer holds" "$tmp/out" "plan --budget"
grep -q "recomputed: nothing" "$tmp/out" || fail "plan --budget: $(cat "$tmp/out")"
grep -q "epoch" "$tmp/out" && fail "plan --budget trained"
"$CLRUN" train "$data/digits_cnn.graph" --loss xent:logits --remat sqrt_n --plan --json >"$tmp/out" 2>&1
rc=$?
expect 0 '"recomputed":\[".*"r1"' "$tmp/out" "train --plan under sqrt_n"
grep -q '"remat_repeated_flops":[1-9]' "$tmp/out" || fail "train --plan: no extra arithmetic in $(cat "$tmp/out")"
"$CLRUN" plan "$data/digits_cnn.graph" --budget 10K --loss xent:logits >"$tmp/out" 2>&1
rc=$?
expect 2 "is below the least the step can hold" "$tmp/out" "plan --budget below the least"
# Without --loss, --budget is an inference executor's budget (tests/cli_plan.sh); a train
# option there is a usage error.
"$CLRUN" plan "$data/digits_cnn.graph" --budget 1G >"$tmp/out" 2>&1
rc=$?
expect 0 "nothing recomputed" "$tmp/out" "plan --budget without a loss"
"$CLRUN" plan "$data/digits_cnn.graph" --budget 1G --optimizer adam >"$tmp/out" 2>&1
rc=$?
expect 2 "without --loss takes a model" "$tmp/out" "plan --budget with train options but no loss"

# Bad input, refused before the first step.
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/bad.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "label 12 in row 100 is outside \[0, 10)" "$tmp/out" "label out of range"
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/short.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "short.npy has 50 rows, the data before it 1437" "$tmp/out" "labels of the wrong length"
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/xtr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "holds f32: i64 expected" "$tmp/out" "labels of the wrong dtype"
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:nothing --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "the model has no tensor 'nothing' to take the loss of" "$tmp/out" "unknown loss tensor"
"$CLRUN" train "$data/digits_mlp.graph" --loss scalar:logits --data "$tmp/xtr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "the loss logits is f32\[32, 10\]: a loss must be one f32 element" "$tmp/out" "non-scalar loss"
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/itr.npy" --labels "$tmp/ytr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "its rows do not fit 'x'" "$tmp/out" "data of the wrong shape"
# A layout clrun does not take is the file's to change, as clrun run says of an input (exit 2).
"$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xf.npy" --labels "$tmp/ytr.npy" >"$tmp/out" 2>&1
rc=$?
expect 2 "Fortran-order arrays are not supported" "$tmp/out" "Fortran-order data"
# Where the state or the model cannot be written is found before training, not after it.
"$CLRUN" train "$data/digits_mlp.graph" $common --data "$tmp/xtr.npy" --save-state "$tmp/none/s" >"$tmp/out" 2>&1
rc=$?
expect 1 "cannot write the train state '$tmp/none/s': No such file or directory (checked before" \
    "$tmp/out" "a --save-state in a missing folder"
grep -q "^epoch" "$tmp/out" && fail "a --save-state in a missing folder trained first"
# An optimizer setting of -1 (or, for --lr, anywhere in (-1, 0)) is refused as any bad value is,
# never taken for "not given" and trained with the default.
for setting in "--lr -1" "--lr -0.5" "--eps -1" "--weight-decay -1" "--betas -1,0.5"; do
    "$CLRUN" train "$data/digits_mlp.graph" --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" \
        $setting >"$tmp/out" 2>&1
    rc=$?
    expect 2 "must be" "$tmp/out" "$setting"
done
"$CLRUN" train "$data/digits_mlp.graph" $common --data "$tmp/xtr.npy" --momentum -1 >"$tmp/out" 2>&1
rc=$?
expect 2 "momentum -1: must be in" "$tmp/out" "--momentum -1"
# refused MESSAGE WHAT ARGS...: `clrun train` of the digits MLP with ARGS is a usage error (2)
# whose output says MESSAGE.
refused() {
    msg=$1 what=$2
    shift 2
    "$CLRUN" train "$data/digits_mlp.graph" "$@" >"$tmp/out" 2>&1
    rc=$?
    expect 2 "$msg" "$tmp/out" "$what"
}
# The scalar loss takes no labels: a labels file would be fed as the model's last input.
refused "the scalar loss takes no --labels" "--labels with the scalar loss" \
    --loss scalar:logits --data "$tmp/xtr.npy" --labels "$tmp/xtr.npy"
refused "the scalar loss takes no --test-labels" "--test-labels with the scalar loss" \
    --loss scalar:logits --data "$tmp/xtr.npy" --test-data "$tmp/xte.npy" --test-labels "$tmp/xte.npy"
# A --data file no input takes is refused, never left out of training without a word.
refused "no input takes file 2 given without a name" "a second unnamed --data file" \
    --loss xent:logits --data "$tmp/xtr.npy" --data "$tmp/itr.npy" --labels "$tmp/ytr.npy"
refused "the model has no input 'q'" "a --data file named for no input" \
    --loss xent:logits --data "x=$tmp/xtr.npy" --data "q=$tmp/xtr.npy" --labels "$tmp/ytr.npy"
refused "two --data files for the model's input 'x'" "two --data files for one input" \
    --loss xent:logits --data "x=$tmp/xtr.npy" --data "x=$tmp/itr.npy" --labels "$tmp/ytr.npy"
refused "--test-data .*ite.npy: the model has 1 input" "a second unnamed --test-data file" \
    --loss xent:logits --data "$tmp/xtr.npy" --labels "$tmp/ytr.npy" --test-data "$tmp/xte.npy" \
    --test-data "$tmp/ite.npy" --test-labels "$tmp/yte.npy"
refused "the xent loss needs --labels" "no labels" --loss xent:logits --data "$tmp/xtr.npy"

# clrun grad: the gradient graph runs, names what the loss does not depend on, refuses a
# non-scalar loss.
cat >"$tmp/loss.graph" <<'GRAPH'
graph m
input x: f32[4, 3]
const w: f32[3, 2] normal(0, 1) seed=1
const u: f32[5] ones
node y: f32[4, 2] = matmul(x, w)
node s: f32[4, 2] = mul(y, y)
node loss: f32[] = reduce_mean(s)
output loss
GRAPH
"$CLRUN" grad "$tmp/loss.graph" --loss loss --wrt w,u --out "$tmp/grad.graph" >"$tmp/out" 2>&1
rc=$?
expect 0 "the loss does not depend on u" "$tmp/out" "clrun grad"
"$CLRUN" run "$tmp/grad.graph" --repeat 1 >"$tmp/out" 2>&1
rc=$?
expect 0 "grad.w f32\[3,2\]" "$tmp/out" "running the gradient graph"
"$CLRUN" grad "$tmp/loss.graph" --loss y >"$tmp/out" 2>&1
rc=$?
expect 2 "the loss y is f32\[4, 2\]: it must be one float element" "$tmp/out" "clrun grad, non-scalar loss"
"$CLRUN" grad "$tmp/loss.graph" --loss loss --wrt '' >"$tmp/out" 2>&1
rc=$?
expect 2 "--wrt names no tensor" "$tmp/out" "clrun grad --wrt ''"
"$CLRUN" grad "$tmp/loss.graph" --loss loss --out "$tmp/no/such/dir/g.graph" >"$tmp/out" 2>&1
rc=$?
expect 1 "g.graph: cannot write the graph: No such file or directory" "$tmp/out" "clrun grad --out into a missing folder"

# An ONNX model from PyTorch (a batch norm among its layers, whose running statistics the
# exporter wrote as Identity nodes of the weights), trained and written back with --save-onnx:
# `clrun run` of the file written gives the test accuracy the trainer measured.
if "$PYTHON" -c 'import torch, onnx' >/dev/null 2>&1; then
    "$PYTHON" - "$tmp" <<'PY' || fail "exporting the PyTorch CNN"
import sys, torch, torch.nn as nn
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Flatten(), nn.Linear(128, 10)).eval()
torch.onnx.export(m, torch.randn(32, 1, 8, 8), sys.argv[1] + "/cnn.onnx", input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "n"}, "logits": {0: "n"}},
                  opset_version=13, training=torch.onnx.TrainingMode.PRESERVE,
                  do_constant_folding=False)
PY
    grep -q BatchNormalization "$tmp/cnn.onnx" || fail "the exporter folded the batch norm away"
    "$CLRUN" train "$tmp/cnn.onnx" --loss xent:logits --data x="$tmp/itr.npy" --labels "$tmp/ytr.npy" \
        --test-data x="$tmp/ite.npy" --test-labels "$tmp/yte.npy" --epochs 3 --lr 0.01 --batch 32 \
        --save-onnx "$tmp/trained.onnx" --json >"$tmp/onnx" 2>"$tmp/onnx.err"
    rc=$?
    expect 0 '"unused_donations":0' "$tmp/onnx" "ONNX CNN with batch norm"
    acc=$(test_accuracy "$tmp/onnx")
    at_least "${acc:-0}" 0.95 || fail "ONNX CNN: test accuracy ${acc:-none} below 0.95 ($(cat "$tmp/onnx.err"))"
    "$CLRUN" run "$tmp/trained.onnx" --shape x=360x1x8x8 --input x="$tmp/ite.npy" --output-dir "$tmp/outdir" \
        --repeat 1 >"$tmp/run" 2>&1 || fail "running the model --save-onnx wrote: $(cat "$tmp/run")"
    "$PYTHON" - "$tmp" "${acc:-0}" <<'PY' || fail "the model --save-onnx wrote does not give the trainer's accuracy"
import sys, numpy as np, onnx
out, acc = sys.argv[1], float(sys.argv[2])
onnx.checker.check_model(onnx.load(out + "/trained.onnx"))
got = (np.load(out + "/outdir/logits.npy").argmax(1) == np.load(out + "/yte.npy")).mean()
sys.exit(0 if abs(got - acc) < 1e-9 else 1)
PY
else
    echo "cli_train: PyTorch or onnx missing: --save-onnx not checked (apt-get install python3-torch python3-onnx)"
fi

[ "$failures" -eq 0 ] || exit 1
echo "cli_train: ok"
