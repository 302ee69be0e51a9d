"""Training from Python (ctx.train): models learn scikit-learn's digits to 95 % and more, one
step's gradients and twenty steps' losses follow PyTorch's for models exported to ONNX, a saved
state resumes bit for bit, and bad feeds are refused without changing anything."""

import gc
import math
import unittest
import warnings

import numpy as np

import clrun
from clrun import _lib
from support import GraphFiles

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

try:
    from sklearn.datasets import load_digits
except ImportError:
    load_digits = None

HAVE_TRAINING = _lib.train_create is not None

# ---- a small model of our own, for the state and the errors --------------------------------

SMALL = """graph small
input x: f32[8, 6]
const w1: f32[6, 5] uniform(-0.4, 0.4) seed=1
const b1: f32[5] uniform(-0.4, 0.4) seed=2
const w2: f32[5, 4] uniform(-0.4, 0.4) seed=3
const b2: f32[4] uniform(-0.4, 0.4) seed=4
node h = matmul(x, w1, b1)
node a = relu(h)
node logits = matmul(a, w2, b2)
output logits
"""


def small_batch(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((8, 6)).astype(np.float32),
            rng.integers(0, 4, 8).astype(np.int64))


def forward(params, x):
    """SMALL's logits in numpy."""
    a = np.maximum(x @ params["w1"] + params["b1"], 0)
    return a @ params["w2"] + params["b2"]


@unittest.skipUnless(HAVE_TRAINING, "this libclrun has no training (clrun_train_create)")
class Steps(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.small = self.graph(SMALL, "small.graph")

    def test_feeds_params_and_a_step_by_name_or_position(self):
        a = self.ctx.train(self.small, loss="xent:logits", optimizer=clrun.SGD(lr=0.1))
        self.assertEqual(a.feeds, [("x", (8, 6), np.dtype(np.float32)),
                                   ("labels", (8,), np.dtype(np.int64))])
        self.assertEqual([p.name for p in a.parameters], ["w1", "b1", "w2", "b2"])
        before = a.params()
        self.assertEqual({k: v.shape for k, v in before.items()},
                         {"w1": (6, 5), "b1": (5,), "w2": (5, 4), "b2": (4,)})
        x, labels = small_batch(1)
        logits = forward(before, x)
        shifted = logits - logits.max(1, keepdims=True)
        want = np.mean(np.log(np.exp(shifted).sum(1)) - shifted[np.arange(8), labels])
        loss = a(x=x, labels=labels)
        self.assertIsInstance(loss, float)
        self.assertAlmostEqual(loss, want, delta=1e-5)
        self.assertEqual(a.last["step"], 1)
        self.assertEqual(a.last["loss"], loss)
        self.assertEqual(a.last["rows"], 8)
        self.assertEqual(a.last["correct"], int((logits.argmax(1) == labels).sum()))
        self.assertFalse(any(np.array_equal(before[k], v) for k, v in a.params().items()))
        # the same step positionally, with int32 labels converted, from a fresh trainer
        b = self.ctx.train(self.small, loss="xent:logits", optimizer=clrun.SGD(lr=0.1))
        self.assertEqual(b(x, labels.astype(np.int32)), loss)
        for name, value in a.params().items():
            np.testing.assert_array_equal(b.params()[name], value)
        self.assertEqual(b.steps, 1)

    def test_a_loaded_model_trains_like_its_file(self):
        model = self.ctx.load(self.small)
        x, labels = small_batch(2)
        from_model = self.ctx.train(model, "xent:logits", clrun.Adam(lr=0.01))
        from_file = self.ctx.train(self.small, "xent:logits", clrun.Adam(lr=0.01))
        self.assertEqual(from_model(x=x, labels=labels), from_file(x=x, labels=labels))
        self.assertEqual(from_model.name, "small")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "already loaded"):
            self.ctx.train(model, "xent:logits", dims={"batch": 2})
        model.close()
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            self.ctx.train(model, "xent:logits")

    def test_evaluate_counts_the_rows_asked_for(self):
        step = self.ctx.train(self.small, loss="xent:logits", optimizer=clrun.SGD(lr=0.1))
        x, labels = small_batch(3)
        params = step.params()
        logits = forward(params, x)
        shifted = logits - logits.max(1, keepdims=True)
        per_row = np.log(np.exp(shifted).sum(1)) - shifted[np.arange(8), labels]
        hits = logits.argmax(1) == labels
        whole = step.evaluate(x=x, labels=labels)
        self.assertEqual(whole["rows"], 8)
        self.assertEqual(whole["correct"], int(hits.sum()))
        self.assertAlmostEqual(whole["loss"], per_row.mean(), delta=1e-5)
        part = step.evaluate(x, labels, rows=3)
        self.assertEqual(part["rows"], 3)
        self.assertEqual(part["correct"], int(hits[:3].sum()))
        self.assertAlmostEqual(part["loss"], per_row[:3].mean(), delta=1e-5)
        for name, value in step.params().items():  # nothing updated
            np.testing.assert_array_equal(value, params[name])
        self.assertEqual(step.steps, 0)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "evaluating 9 rows"):
            step.evaluate(x=x, labels=labels, rows=9)

    def test_mse_and_scalar_losses(self):
        mse = self.ctx.train(self.small, loss="mse:logits", optimizer=clrun.SGD(lr=0.05))
        self.assertEqual([f.name for f in mse.feeds], ["x", "targets"])
        x, _ = small_batch(4)
        targets = np.random.default_rng(5).standard_normal((8, 4)).astype(np.float32)
        want = np.mean((forward(mse.params(), x) - targets) ** 2)
        ev = mse.evaluate(x=x, targets=targets)
        self.assertEqual((ev["correct"], ev["rows"]), (None, None))
        self.assertAlmostEqual(ev["loss"], want, delta=1e-5 * max(1.0, want))
        self.assertAlmostEqual(mse(x=x, targets=targets), want, delta=1e-5 * max(1.0, want))
        self.assertEqual((mse.last["correct"], mse.last["rows"]), (None, None))
        self.assertLess(mse.evaluate(x=x, targets=targets)["loss"], want)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "rows= applies to the xent"):
            mse.evaluate(x=x, targets=targets, rows=2)
        # a model that computes its own loss: fed x alone
        scalar = self.graph(SMALL.replace("output logits", "node sq = mul(logits, logits)\n"
                                          "node l = reduce_mean(sq)\noutput l"), "scalar.graph")
        step = self.ctx.train(scalar, loss="scalar:l", optimizer=clrun.SGD(lr=0.05))
        self.assertEqual([f.name for f in step.feeds], ["x"])
        want = np.mean(forward(step.params(), x) ** 2)
        self.assertAlmostEqual(step(x), want, delta=1e-5 * max(1.0, want))

    def test_a_loss_that_overflows_names_its_step(self):
        scalar = self.graph(SMALL.replace("output logits", "node sq = mul(logits, logits)\n"
                                          "node l = reduce_mean(sq)\noutput l"), "scalar.graph")
        step = self.ctx.train(scalar, loss="scalar:l", optimizer=clrun.SGD(lr=1e6))
        x, _ = small_batch(8)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    r"step (\d+) gave a loss of (infinity|NaN)") as caught:
            for _ in range(20):
                step(x)
        failed = int(caught.exception.message.split("step ")[1].split()[0])
        self.assertEqual(step.last["step"], failed)
        self.assertFalse(math.isfinite(step.last["loss"]))
        self.assertEqual(step.steps, failed)  # its update was applied

    def test_params_chosen_by_name_and_frozen_ones(self):
        text = SMALL.replace("output logits", "const w3: f32[6, 2] zeros\n"
                             "node other = matmul(x, w3)\noutput logits, other")
        path = self.graph(text, "two.graph")
        step = self.ctx.train(path, "xent:logits", clrun.SGD(lr=0.1), params=["w2", "w3"])
        self.assertEqual(list(step.params()), ["w2"])
        self.assertEqual(step.frozen, ["w3"])
        step(*small_batch(6))
        self.assertEqual(step.stats()["params"], 1)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "parameter nope is no f32"):
            self.ctx.train(path, "xent:logits", params=["nope"])

    def test_stats(self):
        step = self.ctx.train(self.small, "xent:logits", clrun.Adam())
        step(*small_batch(7))
        stats = step.stats()
        self.assertEqual(stats["steps"], 1)
        self.assertEqual(stats["params"], 4)
        self.assertEqual(stats["state_tensors"], 8)  # exp_avg and exp_avg_sq of each
        self.assertEqual(stats["param_bytes"], 4 * (30 + 5 + 20 + 4))
        self.assertEqual(stats["state_bytes"], 2 * stats["param_bytes"])
        self.assertEqual(stats["unused_donations"], 0)
        self.assertEqual(stats["unused_donated"], [])
        self.assertGreaterEqual(stats["peak_bytes"], stats["lower_bound_bytes"])
        self.assertEqual(stats["exec"]["peak_bytes"], stats["peak_bytes"])
        self.assertIn(stats["exec"]["mode"], ("pooled", "planned", "naive"))
        self.assertEqual(self.ctx.train(self.small, "xent:logits", mode="planned")
                         .stats()["exec"]["mode"], "planned")

    def test_remat_policies(self):
        base = self.ctx.train(self.small, "xent:logits", clrun.Adam())
        want = self.run_steps(base, range(20, 24))
        for policy in ("dots_saveable", "nothing_saveable", "sqrt_n", "names:logits", "every:2",
                       "except:a"):
            with self.subTest(remat=policy):
                step = self.ctx.train(self.small, "xent:logits", clrun.Adam(), remat=policy)
                self.assertEqual(self.run_steps(step, range(20, 24)), want)
                self.assertEqual(step.remat, policy)
        report = self.ctx.train(self.small, "xent:logits", remat="nothing_saveable").stats()["remat"]
        self.assertGreater(report["dropped"], 0)
        self.assertGreaterEqual(report["repeated_nodes"], report["dropped"])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "unknown policy 'sometimes'"):
            self.ctx.train(self.small, "xent:logits", remat="sometimes")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "'nope'"):
            self.ctx.train(self.small, "xent:logits", remat="names:nope")
        with self.assertRaises(TypeError):
            self.ctx.train(self.small, "xent:logits", remat=3)

    def test_memory_budget(self):
        # eight tanh layers 64 wide over 8 rows: activations enough for recomputing to matter
        lines = ["graph deep", "input x: f32[8, 6]", "const w0: f32[6, 64] uniform(-0.3, 0.3) seed=1",
                 "node m0 = matmul(x, w0)", "node a0 = tanh(m0)"]
        for k in range(1, 8):
            lines += ["const w%d: f32[64, 64] uniform(-0.2, 0.2) seed=%d" % (k, k + 1),
                      "node m%d = matmul(a%d, w%d)" % (k, k - 1, k), "node a%d = tanh(m%d)" % (k, k)]
        lines += ["const wo: f32[64, 4] uniform(-0.2, 0.2) seed=20",
                  "node logits = matmul(a7, wo)", "output logits", ""]
        deep = self.graph("\n".join(lines), "deep.graph")
        ample = self.ctx.train(deep, "xent:logits", memory_budget="1G").stats()
        self.assertEqual(ample["remat_policy"], "none")
        full = ample["planned_peak_bytes"]
        self.assertGreater(full, 0)
        want = self.run_steps(self.ctx.train(deep, "xent:logits"), range(30, 33))
        tight = self.ctx.train(deep, "xent:logits", memory_budget=full - 1)
        stats = tight.stats()
        self.assertNotEqual(stats["remat_policy"], "none")
        self.assertLessEqual(stats["planned_peak_bytes"], full - 1)
        self.assertEqual(self.run_steps(tight, range(30, 33)), want)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    "a memory budget of 64 bytes is below the least the step can hold"):
            self.ctx.train(self.small, "xent:logits", memory_budget=64)
        # the pool's limit as the budget: a context whose pool may reserve one byte less than
        # the unconstrained trainer holds fits the step by recomputing, with the same losses
        limited = clrun.Context(pool_limit=full - 1)
        fitted = limited.train(deep, "xent:logits")
        stats = fitted.stats()
        self.assertNotEqual(stats["remat_policy"], "none")
        self.assertEqual(stats["exec"]["mode"], "planned")
        self.assertLessEqual(stats["planned_peak_bytes"], full - 1)
        self.assertEqual(self.run_steps(fitted, range(30, 33)), want)
        with self.assertRaisesRegex(clrun.OutOfMemoryError, "is below the least the step can hold"):
            clrun.Context(pool_limit="4K").train(deep, "xent:logits")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "not a size"):
            self.ctx.train(self.small, "xent:logits", memory_budget="lots")
        with self.assertRaises(clrun.InvalidArgumentError):
            self.ctx.train(self.small, "xent:logits", memory_budget=0)

    # -- the state --

    def run_steps(self, step, seeds):
        return [step(*small_batch(s)) for s in seeds]

    def test_save_and_load_resume_bit_for_bit(self):
        optimizer = clrun.AdamW(lr=0.02, weight_decay=0.1)
        a = self.ctx.train(self.small, "xent:logits", optimizer)
        self.run_steps(a, range(10, 15))
        saved = self.path("state.bin")
        a.save(saved)
        ahead = self.run_steps(a, range(20, 25))
        ahead_params = a.params()
        # back in the same trainer
        a.load(saved)
        self.assertEqual(a.steps, 5)
        self.assertEqual(self.run_steps(a, range(20, 25)), ahead)
        # and in a new one
        b = self.ctx.train(self.small, "xent:logits", optimizer)
        b.load(saved)
        self.assertEqual(self.run_steps(b, range(20, 25)), ahead)
        self.assertEqual(b.last["step"], 10)
        for trained in (a.params(), b.params()):
            for name, value in ahead_params.items():
                self.assertEqual(trained[name].tobytes(), value.tobytes(), name)
        # a state of another optimizer is refused, naming what differs, and changes nothing
        c = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1, momentum=0.9))
        before = c.params()
        with self.assertRaises(clrun.InvalidArgumentError):
            c.load(saved)
        for name, value in c.params().items():
            np.testing.assert_array_equal(value, before[name])
        with self.assertRaises(clrun.InputOutputError):
            c.load(self.path("missing.bin"))

    # -- errors --

    def test_a_label_out_of_range_changes_nothing(self):
        step = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1, momentum=0.9))
        self.run_steps(step, [30, 31])
        params = step.params()
        x, labels = small_batch(32)
        labels[3] = 4
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    r"label 4 at position 3 is outside \[0, 4\)"):
            step(x=x, labels=labels)
        labels[3], labels[5] = 0, -1
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "label -1 at position 5"):
            step.evaluate(x=x, labels=labels)
        for name, value in step.params().items():
            np.testing.assert_array_equal(value, params[name])
        self.assertEqual(step.last["step"], 2)
        # the next good step is the one that would have come
        twin = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1, momentum=0.9))
        self.run_steps(twin, [30, 31])
        labels[5] = 1
        loss = step(x=x, labels=labels)
        self.assertTrue(math.isfinite(loss))
        self.assertEqual(loss, twin(x=x, labels=labels))
        self.assertEqual(step.last["step"], 3)

    def test_bad_feeds_are_refused_clearly(self):
        step = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1))
        x, labels = small_batch(40)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    r"feed 'x' has shape \(8, 6\), \(7, 6\) given"):
            step(x=x[:7], labels=labels)
        with self.assertRaisesRegex(clrun.InvalidArgumentError,
                                    r"feed 'labels' has shape \(8,\), \(8, 1\) given"):
            step(x=x, labels=labels[:, None])
        with self.assertRaisesRegex(TypeError, "feed 'x': needs float32 values, got int64"):
            step(x=labels.reshape(8, 1).repeat(6, 1), labels=labels)
        with self.assertRaisesRegex(TypeError, "feed 'labels': needs int64 values, got float32"):
            step(x=x, labels=labels.astype(np.float32))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, r"no feed 'y' \(its feeds: x "
                                    r"float32\[8, 6\], labels int64\[8\]\)"):
            step(x=x, y=labels)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "missing feed 'labels'"):
            step(x=x)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "feed 'x' given twice"):
            step(x, x=x, labels=labels)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "takes 2 feeds"):
            step(x, labels, labels)
        self.assertEqual(step.steps, 0)
        self.assertIsNone(step.last)

    def test_bad_settings_are_refused(self):
        for loss in ("logits", "foo:logits", "xent:"):
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "'xent:TENSOR'"):
                self.ctx.train(self.small, loss)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no tensor 'nope'"):
            self.ctx.train(self.small, "xent:nope")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "learning rate -1"):
            self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=-1))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "Nesterov"):
            self.ctx.train(self.small, "xent:logits", clrun.SGD(nesterov=True))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, r"betas \(0.9, 1\)"):
            self.ctx.train(self.small, "xent:logits", clrun.Adam(betas=(0.9, 1.0)))
        with self.assertRaisesRegex(TypeError, "betas is a pair"):
            clrun.Adam(betas=0.9)
        with self.assertRaisesRegex(TypeError, "optimizer is clrun.SGD"):
            self.ctx.train(self.small, "xent:logits", "sgd")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "label_dtype"):
            self.ctx.train(self.small, "xent:logits", label_dtype="float32")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "a loss must be one f32 element"):
            self.ctx.train(self.small, "scalar:logits")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "apply to ONNX models"):
            self.ctx.train(self.small, "xent:logits", dims={"batch": 8})
        step = self.ctx.train(self.small, "xent:logits", label_dtype="int32")
        self.assertEqual(step.feeds[1].dtype, np.int32)

    def test_an_op_without_a_gradient_rule_is_named(self):
        path = self.graph(SMALL.replace("node a = relu(h)", "node a = cumsum(h) axis=1"),
                          "cumsum.graph")
        self.assertFalse(_lib.op_differentiable(b"cumsum"))
        with self.assertRaisesRegex(clrun.UnsupportedError, "cumsum"):
            self.ctx.train(path, "xent:logits")

    def test_gradients_need_keep_gradients_and_a_step(self):
        step = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1), keep_gradients=True)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no step has run"):
            step.gradients()
        x, labels = small_batch(50)
        params = step.params()
        step(x=x, labels=labels)
        grads = step.gradients()
        for name, value in step.params().items():  # plain SGD: p - 0.1 g
            np.testing.assert_allclose(value, params[name] - np.float32(0.1) * grads[name],
                                       rtol=0, atol=1e-6)
        plain = self.ctx.train(self.small, "xent:logits", clrun.SGD(lr=0.1))
        plain(x=x, labels=labels)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "keep_gradients"):
            plain.gradients()

    def test_closing_and_garbage_collection_free_the_state(self):
        gc.collect()
        self.ctx.trim()
        base = self.ctx.memory_stats()["in_use"]
        step = self.ctx.train(self.small, "xent:logits", clrun.Adam())
        step(*small_batch(60))
        self.assertGreater(self.ctx.memory_stats()["in_use"], base)
        del step
        gc.collect()
        self.assertEqual(self.ctx.memory_stats()["in_use"], base)
        with self.ctx.train(self.small, "xent:logits") as step:
            step(*small_batch(61))
        self.assertTrue(step.closed)
        self.assertEqual(self.ctx.memory_stats()["in_use"], base)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            step(*small_batch(62))
        other = clrun.Context()
        step = other.train(self.small, "xent:logits")
        other.close()
        self.assertTrue(step.closed)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "the context is closed"):
            step.params()


# ---- scikit-learn's digits ----------------------------------------------------------------

BATCH = 32


def digits():
    """The 1797 8x8 digits, pixels scaled to [0, 1], shuffled by RandomState(0): the last 360
    are the test set."""
    data = load_digits()
    x = (data.data / 16).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))
    x, y = x[order], y[order]
    return x[:-360], y[:-360], x[-360:], y[-360:]


def uniform(name, shape, fan_in, seed):
    """A constant drawn as PyTorch initialises Linear and Conv2d (kaiming-uniform with a = sqrt(5):
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bias alike)."""
    bound = 1 / math.sqrt(fan_in)
    return "const %s: f32[%s] uniform(%.6f, %.6f) seed=%d" % (
        name, ", ".join(map(str, shape)), -bound, bound, seed)


MLP = "\n".join([
    "graph digits_mlp",
    "input x: f32[%d, 64]" % BATCH,
    uniform("fc1.w", (64, 64), 64, 1), uniform("fc1.b", (64,), 64, 2),
    uniform("fc2.w", (64, 10), 64, 3), uniform("fc2.b", (10,), 64, 4),
    "node h = matmul(x, fc1.w, fc1.b)",
    "node a = relu(h)",
    "node logits = matmul(a, fc2.w, fc2.b)",
    "output logits", ""])

CNN = "\n".join([
    "graph digits_cnn",
    "input x: f32[%d, 1, 8, 8]" % BATCH,
    uniform("c1.w", (8, 1, 3, 3), 9, 1), uniform("c1.b", (8,), 9, 2),
    uniform("c2.w", (16, 8, 3, 3), 72, 3), uniform("c2.b", (16,), 72, 4),
    uniform("fc.w", (256, 10), 256, 5), uniform("fc.b", (10,), 256, 6),
    "node h1 = conv2d(x, c1.w, c1.b) pad=1",
    "node a1 = relu(h1)",
    "node p1 = maxpool2d(a1) kernel=2",
    "node h2 = conv2d(p1, c2.w, c2.b) pad=1",
    "node a2 = relu(h2)",
    "node flat = reshape(a2) shape=[%d, 256]" % BATCH,
    "node logits = matmul(flat, fc.w, fc.b)",
    "output logits", ""])


def accuracy(step, x, y):
    """Rows of (x, y) predicted right, over whole batches and a last partial one (filled with
    copies of its first row, which rows= leaves out)."""
    correct = rows = 0
    for i in range(0, len(x), BATCH):
        xb, yb = x[i:i + BATCH], y[i:i + BATCH]
        n = len(xb)
        if n < BATCH:
            xb = np.concatenate([xb, np.repeat(xb[:1], BATCH - n, 0)])
            yb = np.concatenate([yb, np.repeat(yb[:1], BATCH - n, 0)])
        result = step.evaluate(x=xb, labels=yb, rows=n)
        correct += result["correct"]
        rows += result["rows"]
    assert rows == len(x), (rows, len(x))
    return correct / rows


@unittest.skipUnless(HAVE_TRAINING, "this libclrun has no training (clrun_train_create)")
@unittest.skipIf(load_digits is None, "no scikit-learn (apt-get install python3-sklearn) for "
                 "its digits")
class Digits(GraphFiles):
    @classmethod
    def setUpClass(cls):
        cls.data = digits()

    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def fit(self, step, epochs, shape):
        x, y, test_x, test_y = self.data
        x = x.reshape((-1,) + shape)
        rng = np.random.RandomState(1)
        steps = 0
        for _ in range(epochs):
            order = rng.permutation(len(x))
            for i in range(0, len(order) - BATCH + 1, BATCH):
                batch = order[i:i + BATCH]
                step(x=x[batch], labels=y[batch])
                steps += 1
        self.assertEqual(step.last["step"], steps)
        return accuracy(step, test_x.reshape((-1,) + shape), test_y)

    def test_mlp_with_sgd_momentum(self):
        step = self.ctx.train(self.graph(MLP), "xent:logits",
                              clrun.SGD(lr=0.1, momentum=0.9))
        before = accuracy(step, self.data[2], self.data[3])
        got = self.fit(step, 5, (64,))
        self.assertGreaterEqual(got, 0.95, "test accuracy %.4f (%.4f untrained)" % (got, before))
        self.assertLess(before, 0.5)

    def test_cnn_with_adam(self):
        step = self.ctx.train(self.graph(CNN), "xent:logits", clrun.Adam(lr=1e-2))
        got = self.fit(step, 5, (1, 8, 8))
        self.assertGreaterEqual(got, 0.95, "test accuracy %.4f" % got)


# ---- PyTorch's gradients ------------------------------------------------------------------

CLASSES = 7

if torch is not None:
    class TorchMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(12, 16)
            self.fc2 = torch.nn.Linear(16, CLASSES)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class TorchBlock(torch.nn.Module):
        """A pre-norm transformer block with two heads, and a head giving logits per token."""
        B, T, D, H = 4, 6, 16, 2

        def __init__(self):
            super().__init__()
            d = self.D
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
            self.proj = torch.nn.Linear(d, d)
            self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
            self.head = torch.nn.Linear(d, CLASSES)

        def forward(self, x):
            b, t, d, h = self.B, self.T, self.D, self.H
            n = self.ln1(x)

            def heads(z):
                return z.reshape(b, t, h, d // h).transpose(1, 2)

            q, k, v = heads(self.q(n)), heads(self.k(n)), heads(self.v(n))
            attention = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h), dim=-1)
            x = x + self.proj((attention @ v).transpose(1, 2).reshape(b, t, d))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return self.head(x)

    class TorchCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 6, 3, stride=2, padding=1)
            self.c2 = torch.nn.Conv2d(6, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 2 * 2, CLASSES)

        def forward(self, x):
            x = F.max_pool2d(torch.relu(self.c1(x)), 2)
            x = F.avg_pool2d(torch.relu(self.c2(x)), 2)
            return self.fc(torch.flatten(x, 1))

    class TorchResNet(torch.nn.Module):
        """A small ResNet: a stem, a basic block, a strided block with a 1x1 projection, batch
        norms in training mode, global average pooling and a linear head."""

        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn0 = torch.nn.BatchNorm2d(8)
            self.c1, self.c2 = (torch.nn.Conv2d(8, 8, 3, padding=1, bias=False) for _ in range(2))
            self.bn1, self.bn2 = torch.nn.BatchNorm2d(8), torch.nn.BatchNorm2d(8)
            self.c3 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
            self.c4 = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
            self.bn3, self.bn4 = torch.nn.BatchNorm2d(16), torch.nn.BatchNorm2d(16)
            self.down = torch.nn.Conv2d(8, 16, 1, stride=2, bias=False)
            self.bnd = torch.nn.BatchNorm2d(16)
            self.fc = torch.nn.Linear(16, CLASSES)

        def forward(self, x):
            x = torch.relu(self.bn0(self.stem(x)))
            x = torch.relu(x + self.bn2(self.c2(torch.relu(self.bn1(self.c1(x))))))
            y = self.bn4(self.c4(torch.relu(self.bn3(self.c3(x)))))
            x = torch.relu(y + self.bnd(self.down(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


@unittest.skipUnless(HAVE_TRAINING, "this libclrun has no training (clrun_train_create)")
@unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
@unittest.skipIf(torch is None, "no PyTorch (pip install torch) to compare with")
class AgainstTorch(GraphFiles):
    STEPS = 20

    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def export(self, model, x):
        """`model` with its weights from seed 0, in eval mode, exported to ONNX (opset 13)."""
        path = self.path(type(model).__name__ + ".onnx")
        model.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # PRESERVE (the model is in eval mode): EVAL would fold batch norms into the
            # convolutions
            torch.onnx.export(model, (x,), path, opset_version=13, input_names=["x"],
                              output_names=["logits"],
                              training=torch.onnx.TrainingMode.PRESERVE)
        return path

    def names(self, step, model):
        """{torch parameter: (clrun parameter, transposed)}: ONNX initializers keep the
        state_dict's names, except weights the exporter stored transposed for a MatMul
        (onnx::MatMul_N), found here by their values."""
        ours = step.params()
        out = {}
        for name, p in model.named_parameters():
            value = p.detach().numpy()
            if name in ours:
                np.testing.assert_array_equal(ours[name], value)
                out[name] = (name, False)
                continue
            found = [k for k, v in ours.items()
                     if v.shape == value.T.shape and np.array_equal(v, value.T)]
            self.assertEqual(len(found), 1, "torch's %s is no parameter of clrun's (%s)"
                             % (name, ", ".join(ours)))
            out[name] = (found[0], True)
        self.assertEqual(sorted(k for k, _ in out.values()), sorted(ours))
        return out

    def compare(self, model, batches, optimizer, torch_optimizer, check_gradients=True):
        torch.manual_seed(0)
        x0 = batches[0][0]
        path = self.export(model, x0)
        step = self.ctx.train(path, "xent:logits", optimizer, keep_gradients=check_gradients)
        names = self.names(step, model)
        model.train()
        opt = torch_optimizer(model.parameters())
        for k in range(self.STEPS):
            x, labels = batches[k % len(batches)]
            opt.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, CLASSES), labels.reshape(-1))
            loss.backward()
            got = step(x=x.numpy(), labels=labels.numpy())
            self.assertLessEqual(abs(got - loss.item()), 1e-4,
                                 "step %d: loss %.7f, torch's %.7f" % (k + 1, got, loss.item()))
            if k == 0 and check_gradients:
                grads = step.gradients()
                for name, p in model.named_parameters():
                    ours, transposed = names[name]
                    want = p.grad.numpy()
                    have = grads[ours].T if transposed else grads[ours]
                    scale = np.abs(want).max()
                    # 1e-4 of the tensor's largest gradient; a gradient that is zero in exact
                    # arithmetic (a key's bias under softmax) is rounding noise on both sides
                    err = np.abs(have - want).max()
                    self.assertLessEqual(err, 1e-4 * scale + 1e-7, "gradient of %s (%s): off by "
                                         "%.3g, its largest is %.3g" % (name, ours, err, scale))
            opt.step()
        params = step.params()
        for name, p in model.named_parameters():
            ours, transposed = names[name]
            have = params[ours].T if transposed else params[ours]
            want = p.detach().numpy()
            np.testing.assert_allclose(have, want, rtol=0, atol=1e-4 * np.abs(want).max(),
                                       err_msg=name)
        return step

    def batches(self, shape, label_shape, count=4):
        generator = torch.Generator().manual_seed(1)
        return [(torch.randn(shape, generator=generator),
                 torch.randint(0, CLASSES, label_shape, generator=generator))
                for _ in range(count)]

    def test_mlp(self):
        torch.manual_seed(0)
        model = TorchMLP()
        self.compare(model, self.batches((8, 12), (8,)), clrun.SGD(lr=0.1),
                     lambda p: torch.optim.SGD(p, lr=0.1))

    def test_mlp_other_optimizers(self):
        settings = [
            (clrun.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
             lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                       weight_decay=0.01)),
            (clrun.Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01),
             lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                        weight_decay=0.01)),
            (clrun.AdamW(lr=0.01, weight_decay=0.1),
             lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
        ]
        for ours, theirs in settings:
            with self.subTest(optimizer=ours):
                torch.manual_seed(0)
                self.compare(TorchMLP(), self.batches((8, 12), (8,)), ours, theirs,
                             check_gradients=False)

    def test_transformer_block(self):
        torch.manual_seed(0)
        model = TorchBlock()
        b, t, d = TorchBlock.B, TorchBlock.T, TorchBlock.D
        self.compare(model, self.batches((b, t, d), (b, t)), clrun.SGD(lr=0.1),
                     lambda p: torch.optim.SGD(p, lr=0.1))

    def test_cnn(self):
        torch.manual_seed(0)
        model = TorchCNN()
        self.compare(model, self.batches((4, 3, 16, 16), (4,)), clrun.SGD(lr=0.1),
                     lambda p: torch.optim.SGD(p, lr=0.1))

    def test_remat_gives_the_same_bits_on_real_models(self):
        """Every rematerialisation policy gives the steps' losses and parameters of the step
        without one, bit for bit, on a ResNet with batch norm and a transformer block."""
        cases = [(TorchResNet, self.batches((4, 3, 8, 8), (4,))),
                 (TorchBlock, self.batches((TorchBlock.B, TorchBlock.T, TorchBlock.D),
                                           (TorchBlock.B, TorchBlock.T)))]
        for make, batches in cases:
            torch.manual_seed(0)
            path = self.export(make(), batches[0][0])

            def run(remat):
                step = self.ctx.train(path, "xent:logits", clrun.SGD(lr=0.05, momentum=0.9),
                                      remat=remat)
                losses = [step(x=x.numpy(), labels=y.numpy()) for x, y in batches[:3]]
                return losses, step.params(), step.stats()["remat"]

            base, base_params, report = run(None)
            self.assertEqual(report["repeated_nodes"], 0)
            for policy in ("dots_saveable", "nothing_saveable", "sqrt_n"):
                with self.subTest(model=make.__name__, remat=policy):
                    losses, params, report = run(policy)
                    self.assertEqual(losses, base)
                    for name, value in base_params.items():
                        self.assertTrue(np.array_equal(params[name], value), name)
                    self.assertGreater(report["dropped"], 0)

    def test_resnet_with_batch_norm_in_training_mode(self):
        """Batch statistics in the step (PyTorch's train mode), running statistics updated as
        PyTorch's: evaluation afterwards (running statistics, PyTorch's eval mode) agrees."""
        torch.manual_seed(0)
        model = TorchResNet()
        batches = self.batches((4, 3, 8, 8), (4,))
        step = self.compare(model, batches, clrun.SGD(lr=0.05, momentum=0.9),
                            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9))
        model.eval()
        x, labels = batches[0]
        with torch.no_grad():
            want = F.cross_entropy(model(x), labels).item()
        got = step.evaluate(x=x.numpy(), labels=labels.numpy())["loss"]
        self.assertLessEqual(abs(got - want), 1e-4, "eval loss %.7f, torch's %.7f" % (got, want))


if __name__ == "__main__":
    unittest.main()
