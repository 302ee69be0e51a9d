"""Gradients from Python (ctx.gradient): the gradient graph of a model's scalar loss, run as a
model, agrees with PyTorch and with a float64 numpy backward pass; wrt= picks the tensors; a
tensor the loss does not depend on warns and gets zeros; the graph saves as .graph text; bad
losses, names and ops without a gradient rule are refused by name."""

import gc
import os
import unittest
import warnings

import numpy as np

import clrun
from clrun import _lib
from support import SRCDIR, GraphFiles, cl_reference_count

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

HAVE_GRADIENT = _lib.graph_gradient is not None

# tests/data/train/digits_mlp.graph (64 -> 64 -> 10, batch 32) with its cross-entropy loss
with open(os.path.join(SRCDIR, "tests", "data", "train", "digits_mlp.graph")) as f:
    DIGITS = f.read()
XENT = """
input labels: i64[32]
node per_row = softmax_xent(logits, labels)
node loss = reduce_mean(per_row)
output loss
"""
WEIGHTS = ["w1", "b1", "w2", "b2"]

# a small regression MLP with smooth activations; u feeds another output only, s is rank 0
SMALL = """graph small
input x: f32[5, 4]
input t: f32[5, 3]
const w1: f32[4, 6] uniform(-0.5, 0.5) seed=1
const b1: f32[6] uniform(-0.5, 0.5) seed=2
const w2: f32[6, 3] uniform(-0.5, 0.5) seed=3
const b2: f32[3] uniform(-0.5, 0.5) seed=4
const u: f32[3] uniform(-0.5, 0.5) seed=5
node h = matmul(x, w1, b1)
node a = tanh(h)
node y = matmul(a, w2, b2)
node d = sub(y, t)
node sq = mul(d, d)
node loss = reduce_mean(sq)
node other = add(y, u)
output loss, other
"""


def small_inputs(seed=1):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((5, 4)).astype(np.float32),
            "t": rng.standard_normal((5, 3)).astype(np.float32)}


def small_backward(p, x, t):
    """SMALL's loss and gradients in float64."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    x, t = x.astype(np.float64), t.astype(np.float64)
    a = np.tanh(x @ p["w1"] + p["b1"])
    d = a @ p["w2"] + p["b2"] - t
    dy = 2 * d / d.size
    da = dy @ p["w2"].T
    dh = da * (1 - a * a)
    return np.mean(d * d), {"w1": x.T @ dh, "b1": dh.sum(0), "w2": a.T @ dy, "b2": dy.sum(0),
                            "x": dh @ p["w1"].T, "t": -dy}


def close(test, got, want, what):
    """got within 1e-4 of want, relative to want's largest element."""
    scale = float(np.abs(want).max())
    err = float(np.abs(np.asarray(got, np.float64) - want).max())
    test.assertLessEqual(err, 1e-4 * scale + 1e-7, "%s: off by %.3g, its largest is %.3g"
                         % (what, err, scale))


@unittest.skipUnless(HAVE_GRADIENT, "this libclrun has no gradients (clrun_graph_gradient)")
class Gradient(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)
        self.small = self.graph(SMALL, "small.graph")

    def weights(self, text, names):
        """The values of the constants `names` of a .graph text, made outputs of it."""
        path = self.graph(text + "\noutput %s\n" % ", ".join(names), "weights.graph")
        with self.ctx.load(path) as model:
            feeds = {i.name: np.zeros(i.shape, i.dtype) for i in model.inputs}
            outputs = model(feeds)
        return {name: outputs[name] for name in names}

    def test_default_wrt_is_every_weight_and_matches_numpy(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # u is no trainable weight of the loss: no warning
            g = self.ctx.gradient(self.small, "loss")
        self.assertIsInstance(g, clrun.Model)
        self.assertEqual([o.name for o in g.outputs],
                         ["loss"] + ["grad." + n for n in WEIGHTS])
        self.assertEqual([i.name for i in g.inputs], ["x", "t"])
        self.assertEqual(g.outputs[0].shape, ())
        p = self.weights(SMALL, WEIGHTS)
        for o in g.outputs[1:]:
            self.assertEqual(o.shape, p[o.name[5:]].shape)
        feeds = small_inputs()
        out = g(feeds)
        loss, want = small_backward(p, feeds["x"], feeds["t"])
        self.assertAlmostEqual(float(out["loss"]), loss, delta=1e-5 * max(1, loss))
        for name in WEIGHTS:
            close(self, out["grad." + name], want[name], name)

    def test_wrt_picks_inputs_and_weights_in_order(self):
        g = self.ctx.gradient(self.small, "loss", ["x", "w2"])
        self.assertEqual([o.name for o in g.outputs], ["loss", "grad.x", "grad.w2"])
        feeds = small_inputs(2)
        out = g(**feeds)
        _, want = small_backward(self.weights(SMALL, WEIGHTS), feeds["x"], feeds["t"])
        close(self, out["grad.x"], want["x"], "x")
        close(self, out["grad.w2"], want["w2"], "w2")
        one = self.ctx.gradient(self.small, "loss", "t")  # one name
        close(self, one(feeds)["grad.t"], want["t"], "t")

    def test_finite_differences_of_the_loss(self):
        """The gradient with respect to x against central differences of the forward's loss,
        evaluated in float64 by numpy from the graph's own weights."""
        g = self.ctx.gradient(self.small, "loss", ["x"])
        feeds = small_inputs(3)
        got = g(feeds)["grad.x"]
        p = {k: v.astype(np.float64) for k, v in self.weights(SMALL, WEIGHTS).items()}
        x, t = feeds["x"].astype(np.float64), feeds["t"].astype(np.float64)

        def loss(x):
            return np.mean((np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - t) ** 2)
        fd = np.empty_like(x)
        for i in np.ndindex(*x.shape):
            e = np.zeros_like(x)
            e[i] = 1e-6
            fd[i] = (loss(x + e) - loss(x - e)) / 2e-6
        close(self, got, fd, "x by finite differences")

    def test_a_tensor_the_loss_does_not_depend_on_warns_and_gets_zeros(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g = self.ctx.gradient(self.small, "loss", ["w1", "u"])
        self.assertEqual(len(caught), 1)
        self.assertIs(caught[0].category, UserWarning)
        self.assertIn("'u'", str(caught[0].message))
        self.assertNotIn("w1", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)  # the caller's line
        out = g(small_inputs())
        np.testing.assert_array_equal(out["grad.u"], np.zeros(3, np.float32))
        self.assertGreater(np.abs(out["grad.w1"]).max(), 0)

    def test_a_loaded_model_gives_the_gradient_of_its_file(self):
        model = self.ctx.load(self.small)
        feeds = small_inputs(4)
        from_model = self.ctx.gradient(model, "loss")(feeds)
        from_file = self.ctx.gradient(self.small, "loss")(feeds)
        for name, value in from_file.items():
            np.testing.assert_array_equal(from_model[name], value, err_msg=name)
        self.assertIn("other", model(feeds))  # the model itself is untouched
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "already loaded"):
            self.ctx.gradient(model, "loss", dims={"batch": 2})
        model.close()
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            self.ctx.gradient(model, "loss")

    def test_mode_and_fusion_give_the_same_gradients(self):
        feeds = small_inputs(5)
        base = self.ctx.gradient(self.small, "loss")(feeds)
        for mode, fusion in (("planned", True), ("naive", False)):
            g = self.ctx.gradient(self.small, "loss", mode=mode, fusion=fusion)
            self.assertEqual(g.mode, mode)
            for name, value in g(feeds).items():
                close(self, value, base[name].astype(np.float64), "%s (%s)" % (name, mode))

    def test_save_graph_writes_what_clrun_grad_writes(self):
        g = self.ctx.gradient(self.small, "loss", ["w1", "x"])
        path = self.path("g.graph")
        g.save_graph(path)
        with open(path) as f:
            text = f.read()
        self.assertIn("output loss, grad.w1, grad.x", text)
        again = self.ctx.load(path)
        feeds = small_inputs(6)
        want = g(feeds)
        got = again(feeds)
        self.assertEqual(list(got), list(want))
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        with self.assertRaises(clrun.InputOutputError):
            g.save_graph(self.path("no/such/dir.graph"))
        g.close()
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            g.save_graph(path)

    def test_errors_name_what_is_wrong(self):
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "loss: model 'small' has no "
                                    "tensor 'nope'"):
            self.ctx.gradient(self.small, "nope")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "wrt: model 'small' has no "
                                    "tensor 'nope'"):
            self.ctx.gradient(self.small, "loss", ["w1", "nope"])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "one float element"):
            self.ctx.gradient(self.small, "sq")
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "one float element"):
            self.ctx.gradient(self.small, "sq", ["w1"])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "twice"):
            self.ctx.gradient(self.small, "loss", ["w1", "w1"])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no tensor id 9999"):
            self.ctx.gradient(self.small, 9999)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "non-empty"):
            self.ctx.gradient(self.small, "loss", [])
        with self.assertRaises(TypeError):
            self.ctx.gradient(self.small, 1.5)
        with self.assertRaises(TypeError):
            self.ctx.gradient(self.small, "loss", [3])
        with self.assertRaises(TypeError):
            self.ctx.gradient(42, "loss")
        with self.assertRaises(clrun.InputOutputError):
            self.ctx.gradient(self.path("missing.graph"), "loss")

    def test_an_op_without_a_gradient_rule_is_named(self):
        path = self.graph(SMALL.replace("node a = tanh(h)", "node a = cumsum(h) axis=1"),
                          "cumsum.graph")
        with self.assertRaisesRegex(clrun.UnsupportedError, "op 'cumsum' .*no gradient rule"):
            self.ctx.gradient(path, "loss")
        # off the loss' path it does not matter
        path = self.graph(SMALL.replace("node other = add(y, u)", "node other = cumsum(y) "
                                        "axis=0"), "cumsum_off.graph")
        self.ctx.gradient(path, "loss").close()

    def settled(self):
        gc.collect()
        self.ctx.trim()
        return self.ctx.memory_stats()["in_use"], cl_reference_count(self.ctx)

    def test_failures_leave_nothing_on_the_device(self):
        def cycle():
            g = self.ctx.gradient(self.small, "loss")
            g(small_inputs())
            g.close()
        cycle()  # builds the kernels and starts the pool
        before = self.settled()
        cumsum = self.graph(SMALL.replace("node a = tanh(h)", "node a = cumsum(h) axis=1"),
                            "cumsum.graph")
        for _ in range(20):
            for args in ((self.small, "nope"), (self.small, "sq"), (cumsum, "loss")):
                with self.assertRaises(clrun.Error):
                    self.ctx.gradient(*args)
            cycle()
        self.assertEqual(self.settled(), before)


@unittest.skipUnless(HAVE_GRADIENT, "this libclrun has no gradients (clrun_graph_gradient)")
@unittest.skipIf(torch is None, "no PyTorch (apt-get install python3-torch) to compare with")
class AgainstTorch(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def test_digits_mlp_cross_entropy(self):
        """tests/data/train/digits_mlp.graph with its mean cross-entropy: every weight's
        gradient within 1e-4 (relative to its largest element) of PyTorch's."""
        path = self.graph(DIGITS + XENT, "digits_xent.graph")
        g = self.ctx.gradient(path, "loss")
        self.assertEqual([o.name for o in g.outputs],
                         ["loss"] + ["grad." + n for n in WEIGHTS])
        with self.ctx.load(self.graph(DIGITS + "\noutput w1, b1, w2, b2\n", "w.graph")) as m:
            weights = m(x=np.zeros((32, 64), np.float32))
        generator = torch.Generator().manual_seed(1)
        x = torch.rand((32, 64), generator=generator)
        labels = torch.randint(0, 10, (32,), generator=generator)
        params = {n: torch.tensor(weights[n], requires_grad=True) for n in WEIGHTS}
        h = torch.relu(x @ params["w1"] + params["b1"])
        loss = F.cross_entropy(h @ params["w2"] + params["b2"], labels)
        loss.backward()
        out = g(x=x.numpy(), labels=labels.numpy())
        self.assertAlmostEqual(float(out["loss"]), loss.item(), delta=1e-5)
        for n in WEIGHTS:
            close(self, out["grad." + n], params[n].grad.numpy().astype(np.float64), n)

    @unittest.skipIf(_lib.graph_load_onnx is None, "this libclrun has no ONNX import")
    def test_onnx_model_keeps_its_weight_names(self):
        """A PyTorch module exported to ONNX with its loss: the gradients take the
        initializers' own names, given as bytes or as a path, even one that is no identifier
        (the exporter's transposed onnx::MatMul_N, written onnx__MatMul_N in .graph text)."""
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(4, 8, bias=False)  # MatMul by onnx::MatMul_N
                self.fc2 = torch.nn.Linear(8, 3)              # Gemm by fc2.weight

            def forward(self, x, t):
                return ((self.fc2(torch.sigmoid(self.fc1(x))) - t) ** 2).mean()

        torch.manual_seed(0)
        net = Net()
        x, t = torch.randn(6, 4), torch.randn(6, 3)
        path = self.path("net.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (x, t), path, opset_version=13, input_names=["x", "t"],
                              output_names=["loss"])
        loss = net(x, t)
        loss.backward()
        with open(path, "rb") as f:
            data = f.read()
        for source in (path, data):
            g = self.ctx.gradient(source, "loss")
            names = [o.name for o in g.outputs]
            self.assertEqual(names[0], "loss")
            self.assertRegex(names[1], r"^grad\.onnx::MatMul_\d+$")
            self.assertEqual(names[2:], ["grad.fc2.weight", "grad.fc2.bias"])
            out = g(x=x.numpy(), t=t.numpy())
            self.assertAlmostEqual(float(out["loss"]), loss.item(), delta=1e-5)
            close(self, out[names[1]], net.fc1.weight.grad.numpy().T, "fc1.weight")
            close(self, out["grad.fc2.weight"], net.fc2.weight.grad.numpy(), "fc2.weight")
            close(self, out["grad.fc2.bias"], net.fc2.bias.grad.numpy(), "fc2.bias")
            # wrt by those names; the saved text has identifiers
            one = self.ctx.gradient(source, "loss", [names[1][5:], "x"])
            self.assertEqual([o.name for o in one.outputs], ["loss", names[1], "grad.x"])
            np.testing.assert_array_equal(one(x=x.numpy(), t=t.numpy())[names[1]],
                                          out[names[1]])
            one.save_graph(self.path("net_grad.graph"))
            with open(self.path("net_grad.graph")) as f:
                self.assertIn("output loss, grad.%s, grad.x" % names[1][5:].replace("::", "__"),
                              f.read())


if __name__ == "__main__":
    unittest.main()
