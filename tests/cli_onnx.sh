#!/bin/sh
# The CLI with ONNX models and real data: `clrun onnx-test` lines, summary, --json and exit
# status on a passing, a failing and a refused case; `clrun run` with --input (.npy and .pb),
# --output-dir and its errors; --dim/--shape; .graph files with --input. Cases are made with
# python3-onnx; skipped (exit 77) without it. CLRUN_BIN overrides the tool (default ./clrun).
set -u
. "${srcdir:-.}/tests/cli_common.sh"
need_onnx_python
make_tmp cli-onnx

# Four cases: relu (right answer), relu_wrong (expected output off at one element), a refused
# operator, and one under the name of a suite case whose data are known wrong; plus a model with a
# symbolic batch.
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
case("refused", helper.make_node("Bernoulli", ["x"], ["y"], name="Bernoulli_7"), x, x, opset=15)
# A case the runner knows the suite gets wrong, by its folder's name: failing, it is BAD-DATA.
case("test_adam_multiple", helper.make_node("Relu", ["x"], ["y"]), x, wrong)
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
grep -q "^UNSUPPORTED  *$cases/refused: .*node 0 'Bernoulli_7' (Bernoulli, opset 15): operator Bernoulli is not supported" "$tmp/out" ||
    fail "the UNSUPPORTED line does not give the refusal: $(cat "$tmp/out")"
grep -q "^PASS  *$cases/batch\$" "$tmp/out" || fail "symbolic dims are not bound from the test data"
grep -q "^BAD-DATA  *$cases/test_adam_multiple: .*onnx/onnx#7749); output 0 'y' element \[1, 2\]" "$tmp/out" ||
    fail "the BAD-DATA line does not give the reason and the element: $(cat "$tmp/out")"
tail -n 1 "$tmp/out" | grep -q "^2 passed, 1 failed, 1 bad data, 1 unsupported\$" || fail "summary: $(tail -n 1 "$tmp/out")"
"$CLRUN" onnx-test "$cases/test_adam_multiple" >/dev/null 2>&1 || fail "a BAD-DATA case alone exited $?, expected 0"
"$CLRUN" onnx-test "$cases/relu" "$cases/refused" --json >"$tmp/json" 2>&1
rc=$?
[ $rc = 0 ] || fail "onnx-test without failures exited $rc"
"$PYTHON" -c "
import json, sys
d = json.load(open('$tmp/json'))
assert d['passed'] == 1 and d['failed'] == 0 and d['bad_data'] == 0 and d['unsupported'] == 1, d
assert [c['result'] for c in d['cases']] == ['PASS', 'UNSUPPORTED'], d
assert 'Bernoulli' in d['cases'][1]['message']
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
[ $? = 2 ] && grep -q "names 'z', which is not an input of the model" "$tmp/err" || fail "unknown input: $(cat "$tmp/err")"
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$tmp/x64.npy" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "holds f64\[2, 3\], but input 'x' is f32\[2, 3\]" "$tmp/err" || fail "wrong dtype: $(cat "$tmp/err")"
"$CLRUN" run "$cases/relu/model.onnx" --input "x=$tmp/xf.npy" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "Fortran-order arrays are not supported" "$tmp/err" || fail "Fortran order: $(cat "$tmp/err")"
"$CLRUN" run "$cases/batch/model.onnx" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "input 'x' dimension 0 ('N') is not bound" "$tmp/err" &&
    grep -q "bind it with --dim NAME=V, --shape INPUT=AxB or --input INPUT=FILE" "$tmp/err" || fail "unbound dim: $(cat "$tmp/err")"
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

# The model's own names (issue 23, item 1): outputs "39", "dense/Relu:0" and '"q"' keep them in
# the report and the JSON; only the file names of --output-dir are made safe ([A-Za-z0-9._-]
# kept, anything else '_'); --input takes the model's name. The fed file's shape binds 'batch'
# (item 2), and --output-dir's missing parents are made.
"$PYTHON" - "$tmp" <<'PY'
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper
root = sys.argv[1]
g = helper.make_graph([helper.make_node("Relu", ["input:0"], ["dense/Relu:0"], name="dense/Relu"),
                       helper.make_node("Add", ["dense/Relu:0", "dense/Relu:0"], ["39"]),
                       helper.make_node("Neg", ["39"], ['"q"'])], "names",
    [helper.make_tensor_value_info("input:0", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 3]) for n in ("39", "dense/Relu:0", '"q"')])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(root, "names.onnx"))
np.save(os.path.join(root, "x5.npy"), np.arange(15, dtype=np.float32).reshape(5, 3) - 7)
# a sample rate that decides a shape: y = reshape(x, [sr / 8000, -1])
g = helper.make_graph([helper.make_node("Div", ["sr", "k"], ["hop"]),
                       helper.make_node("Unsqueeze", ["hop", "ax"], ["hop1"]),
                       helper.make_node("Concat", ["hop1", "rest"], ["target"], axis=0),
                       helper.make_node("Reshape", ["x", "target"], ["y"])], "sr",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    initializer=[helper.make_tensor("k", TensorProto.INT64, [], [8000]),
                 helper.make_tensor("ax", TensorProto.INT64, [1], [0]),
                 helper.make_tensor("rest", TensorProto.INT64, [1], [-1])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(root, "sr.onnx"))
np.save(os.path.join(root, "sr.npy"), np.array(24000, np.int64))
PY
"$CLRUN" run "$tmp/names.onnx" --input "input:0=$tmp/x5.npy" --output-dir "$tmp/deep/er/out" --repeat 1 \
    >"$tmp/out" 2>"$tmp/err" || fail "names model with --input: $(cat "$tmp/err")"
grep -q "^output      39 f32\[5,3\]" "$tmp/out" || fail "the report renames output 39: $(cat "$tmp/out")"
grep -q "^output      dense/Relu:0 " "$tmp/out" || fail "the report renames dense/Relu:0: $(cat "$tmp/out")"
"$PYTHON" -c "
import numpy as np
x = np.load('$tmp/x5.npy')
r = np.maximum(x, 0)
for f, want in (('39', r + r), ('dense_Relu_0', r), ('_q_', -(r + r))):
    assert (np.load('$tmp/deep/er/out/' + f + '.npy') == want).all(), f
" || fail "--output-dir files of the model's names: $(ls "$tmp/deep/er/out" 2>&1)"
"$CLRUN" run "$tmp/names.onnx" --dim batch=2 --repeat 1 --json >"$tmp/out" 2>"$tmp/err" || fail "names --json: $(cat "$tmp/err")"
"$PYTHON" -c "
import json
d = json.load(open('$tmp/out'))
assert [o['name'] for o in d['outputs']] == ['39', 'dense/Relu:0', '\"q\"'], d['outputs']
" || fail "--json renames outputs: $(cat "$tmp/out")"
# the trace carries the model's node names and output names
"$CLRUN" run "$tmp/names.onnx" --dim batch=2 --repeat 1 --trace "$tmp/names.json" >/dev/null 2>"$tmp/err" ||
    fail "names --trace: $(cat "$tmp/err")"
"$PYTHON" -c "
import json
ev = [e for e in json.load(open('$tmp/names.json'))['traceEvents'] if e.get('ph') == 'X']
assert ('dense/Relu', 'dense/Relu:0') in [(e['args'].get('node'), e['args']['output']) for e in ev], ev
" || fail "trace node names: $(cat "$tmp/names.json")"
# conflicting bindings are refused, naming both
"$CLRUN" run "$tmp/names.onnx" --dim batch=2 --dim batch=3 >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "dims bind dimension 'batch' twice, to 2 and to 3" "$tmp/err" || fail "--dim twice: $(cat "$tmp/err")"
"$CLRUN" run "$tmp/names.onnx" --dim batch=2 --input "input:0=$tmp/x5.npy" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "has 5 in dimension 0 ('batch'), but dims bind 'batch' to 2" "$tmp/err" &&
    grep -q "the shape of input 'input:0' is that of its --input file $tmp/x5.npy" "$tmp/err" ||
    fail "--dim against a fed shape: $(cat "$tmp/err")"

# A bad --output-dir fails before the work (item 7): before the model is even read.
: >"$tmp/afile"
"$CLRUN" run "$tmp/no-such-model.onnx" --output-dir "$tmp/afile/sub" >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "output-dir $tmp/afile/sub: $tmp/afile is not a folder" "$tmp/err" ||
    fail "--output-dir under a file: $(cat "$tmp/err")"
"$CLRUN" run "$tmp/no-such-model.onnx" --output-dir "$tmp/afile" >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "is not a folder" "$tmp/err" || fail "--output-dir a file: $(cat "$tmp/err")"

# Two outputs whose safe file names collide are refused before the work, not overwritten.
"$PYTHON" -c "
import onnx
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node('Relu', ['x'], ['a/b']), helper.make_node('Neg', ['x'], ['a_b'])], 'c',
    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ('a/b', 'a_b')])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '$tmp/collide.onnx')
"
"$CLRUN" run "$tmp/collide.onnx" --output-dir "$tmp/col" >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "outputs 'a/b' and 'a_b' would both be written as $tmp/col/a_b.npy" "$tmp/err" ||
    fail "colliding output files: $(cat "$tmp/err")"

# --const fixes an input at load (item 12): the shape it decides folds.
"$CLRUN" run "$tmp/sr.onnx" --repeat 1 >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -q "must be known at load time" "$tmp/err" || fail "sr unfixed: $(cat "$tmp/err")"
"$CLRUN" run "$tmp/sr.onnx" --const sr=16000 --input "x=$tmp/x.npy" --output-dir "$tmp/sr1" --repeat 1 \
    >"$tmp/out" 2>"$tmp/err" || fail "--const sr=16000: $(cat "$tmp/err")"
"$CLRUN" run "$tmp/sr.onnx" --const "sr=$tmp/sr.npy" --output-dir "$tmp/sr2" --repeat 1 \
    >"$tmp/out" 2>"$tmp/err" || fail "--const sr=FILE.npy: $(cat "$tmp/err")"
"$PYTHON" -c "
import numpy as np
assert np.load('$tmp/sr1/y.npy').shape == (2, 3)
assert np.load('$tmp/sr2/y.npy').shape == (3, 2)
" || fail "--const does not decide the shape"
"$CLRUN" run "$tmp/sr.onnx" --const sr=16000.5 >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "the value given for input 'sr' (16000.5) is no int64" "$tmp/err" || fail "--const inexact: $(cat "$tmp/err")"
"$CLRUN" plan "$tmp/sr.onnx" --const sr=16000 >"$tmp/out" 2>"$tmp/err" || fail "plan --const: $(cat "$tmp/err")"
# A --const file that cannot be read fails the command (exit 1); it never runs on seeded values.
for cmd in run plan; do
    "$CLRUN" $cmd "$tmp/collide.onnx" --const "x=$tmp/no-such.npy" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc = 1 ] && grep -q "no-such.npy: cannot read" "$tmp/err" && ! grep -q "checksum\|peak" "$tmp/out" ||
        fail "$cmd --const with a missing file: exit $rc, $(cat "$tmp/err" "$tmp/out")"
done
# An If whose condition --const settles takes its branch at load (the other is never imported);
# a condition known only at run time gives the same results.
"$PYTHON" -c "
import onnx, numpy as np
from onnx import TensorProto, helper
f = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])
inner = helper.make_graph([helper.make_node('Add', ['x', 'x'], ['d'])], 'inner', [], [f('d')])
low = helper.make_graph([helper.make_node('Neg', ['x'], ['n'])], 'low', [], [f('n')])
# then: x * 2 through a nested If on a constant (true: x + x); else: -x
nested = helper.make_node('If', ['yes'], ['t'], then_branch=inner, else_branch=low)
high = helper.make_graph([nested], 'high', [], [f('t')], [helper.make_tensor('yes', TensorProto.BOOL, [], [True])])
g = helper.make_graph([helper.make_node('Greater', ['sr', 'th'], ['c']),
                       helper.make_node('If', ['c'], ['y'], then_branch=high, else_branch=low)], 'branchy',
    [f('x'), helper.make_tensor_value_info('sr', TensorProto.INT64, [])], [f('y')],
    [helper.make_tensor('th', TensorProto.INT64, [], [8000])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
onnx.checker.check_model(m)
onnx.save(m, '$tmp/if.onnx')
np.save('$tmp/x3.npy', np.array([1, -2, 3], np.float32))
" || fail "could not build the If model"
for sr in 16000 8000; do
    "$CLRUN" run "$tmp/if.onnx" --const sr=$sr --input "x=$tmp/x3.npy" --output-dir "$tmp/if$sr" --repeat 1 \
        >"$tmp/out" 2>"$tmp/err" || fail "If, --const sr=$sr: $(cat "$tmp/err")"
done
"$PYTHON" -c "
import numpy as np
assert np.load('$tmp/if16000/y.npy').tolist() == [2, -4, 6], np.load('$tmp/if16000/y.npy')
assert np.load('$tmp/if8000/y.npy').tolist() == [-1, 2, -3], np.load('$tmp/if8000/y.npy')
" || fail "If does not take the branch --const decides"
# Fed at run time instead, the same results: both branches imported, the one not taken skipped.
for sr in 16000 8000; do
    "$PYTHON" -c "import numpy as np; np.save('$tmp/sr$sr.npy', np.array($sr, np.int64))" &&
    "$CLRUN" run "$tmp/if.onnx" --input "sr=$tmp/sr$sr.npy" --input "x=$tmp/x3.npy" --output-dir "$tmp/ifrt$sr" \
        --repeat 1 >"$tmp/out" 2>"$tmp/err" || fail "If, sr=$sr at run time: $(cat "$tmp/err")"
    cmp -s "$tmp/if$sr/y.npy" "$tmp/ifrt$sr/y.npy" || fail "If, sr=$sr at run time differs from --const"
done
[ $failures = 0 ]
