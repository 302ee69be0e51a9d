#!/bin/sh
# The CLI with ONNX models and real data: `clrun onnx-test` lines, summary, --json and exit
# status on a passing, a failing and a refused case; `clrun run` with --input (.npy and .pb),
# --output-dir and its errors; --dim/--shape; .graph files with --input. Cases are made with
# python3-onnx; skipped (exit 77) without it. CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp cli-onnx

# Three cases: relu (right answer), relu_wrong (expected output off at one element), and a
# refused operator; plus a model with a symbolic batch.
"$PYTHON" - "$tmp" <<'PY'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
root = sys.argv[1]
def case(name, node, x, y, opset=13, xdims=None):
    d = os.path.join(root, "cases", name, "test_data_set_0")
    os.makedirs(d)
    g = helper.make_graph([node], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, xdims or list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, xdims or list(y.shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
              os.path.join(root, "cases", name, "model.onnx"))
    open(os.path.join(d, "input_0.pb"), "wb").write(numpy_helper.from_array(x, "x").SerializeToString())
    open(os.path.join(d, "output_0.pb"), "wb").write(numpy_helper.from_array(y, "y").SerializeToString())
x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
case("relu", helper.make_node("Relu", ["x"], ["y"]), x, np.maximum(x, 0))
wrong = np.maximum(x, 0)
wrong[1, 2] = 7
case("relu_wrong", helper.make_node("Relu", ["x"], ["y"]), x, wrong)
case("refused", helper.make_node("Det", ["x"], ["y"], name="Det_7"), x, x, opset=13)
case("batch", helper.make_node("Relu", ["x"], ["y"]), x, np.maximum(x, 0), xdims=["N", 3])
np.save(os.path.join(root, "x.npy"), x)
np.save(os.path.join(root, "x64.npy"), x.astype(np.float64))
np.save(os.path.join(root, "xf.npy"), np.asfortranarray(np.ones((2, 3), np.float32)))
PY
cases=$tmp/cases

# onnx-test: one line per case, the summary, exit 1 because one failed.
"$CLRUN" onnx-test "$cases" >"$tmp/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "onnx-test with a failing case exited $rc, expected 1"
grep -q "^PASS  *$cases/relu\$" "$tmp/out" || fail "no PASS line for relu: $(cat "$tmp/out")"
grep -q "^FAIL  *$cases/relu_wrong: output 0 'y' element \[1, 2\] (flat 5): got 6, expected 7" "$tmp/out" ||
    fail "the FAIL line does not name the worst element: $(cat "$tmp/out")"
grep -q "^UNSUPPORTED  *$cases/refused: .*node 0 'Det_7' (Det, opset 13): operator Det is not supported" "$tmp/out" ||
    fail "the UNSUPPORTED line does not give the refusal: $(cat "$tmp/out")"
grep -q "^PASS  *$cases/batch\$" "$tmp/out" || fail "symbolic dims are not bound from the test data"
tail -n 1 "$tmp/out" | grep -q "^2 passed, 1 failed, 1 unsupported\$" || fail "summary: $(tail -n 1 "$tmp/out")"
"$CLRUN" onnx-test "$cases/relu" "$cases/refused" --json >"$tmp/json" 2>&1
rc=$?
[ $rc = 0 ] || fail "onnx-test without failures exited $rc"
"$PYTHON" -c "
import json, sys
d = json.load(open('$tmp/json'))
assert d['passed'] == 1 and d['failed'] == 0 and d['unsupported'] == 1, d
assert [c['result'] for c in d['cases']] == ['PASS', 'UNSUPPORTED'], d
assert 'Det' in d['cases'][1]['message']
" || fail "onnx-test --json: $(cat "$tmp/json")"

# run: --input from .npy and .pb, --output-dir; the outputs as numpy reads them.
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$tmp/x.npy" --output-dir "$tmp/o1" --repeat 1 >/dev/null 2>"$tmp/err" ||
    fail "run with --input x.npy: $(cat "$tmp/err")"
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$cases/relu/test_data_set_0/input_0.pb" --output-dir "$tmp/o2" \
    --repeat 1 >/dev/null 2>"$tmp/err" || fail "run with --input .pb: $(cat "$tmp/err")"
"$PYTHON" -c "
import numpy as np
for d in ('o1', 'o2'):
    y = np.load('$tmp/' + d + '/y.npy')
    assert y.dtype == np.float32 and (y == np.maximum(np.load('$tmp/x.npy'), 0)).all(), y
" || fail "--output-dir y.npy is not relu(x)"
# errors: an unknown input, a wrong dtype, Fortran order, an unbound dim, a bad --shape
"$CLRUN" run "$cases/relu/model.onnx" --input "z=$tmp/x.npy" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "names 'z', which is not an input of the graph (inputs: x)" "$tmp/err" || fail "unknown input: $(cat "$tmp/err")"
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$tmp/x64.npy" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "holds f64\[2, 3\], but input 'x' is f32\[2, 3\]" "$tmp/err" || fail "wrong dtype: $(cat "$tmp/err")"
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$tmp/xf.npy" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "Fortran-order arrays are not supported" "$tmp/err" || fail "Fortran order: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "input 'x' dimension 0 ('N') is not bound: give --dim N=" "$tmp/err" || fail "unbound dim: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" --dim N=2 --repeat 1 >/dev/null 2>"$tmp/err" || fail "--dim: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" --shape x=2x3 --repeat 1 >/dev/null 2>"$tmp/err" || fail "--shape: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" --shape x=2x4 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "which the model fixes at 3" "$tmp/err" || fail "--shape against a fixed dim: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" --shape x=2y3 >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "--shape x=2y3 is not a usage error"
"$CLRUN" plan "$cases/batch/model.onnx" --dim N=4 >/dev/null 2>"$tmp/err" || fail "plan MODEL.onnx: $(cat "$tmp/err")"

# .graph files take --input and --output-dir too.
cat >"$tmp/g.graph" <<'G'
graph g
input x: f32[2, 3]
node y: f32[2, 3] = relu(x)
output y
G
"$CLRUN" run "$tmp/g.graph" --input "x=$tmp/x.npy" --output-dir "$tmp/o3" --repeat 1 >/dev/null 2>"$tmp/err" ||
    fail "run FILE.graph --input: $(cat "$tmp/err")"
"$PYTHON" -c "
import numpy as np
assert (np.load('$tmp/o3/y.npy') == np.maximum(np.load('$tmp/x.npy'), 0)).all()
" || fail ".graph --output-dir"
[ $failures = 0 ]
