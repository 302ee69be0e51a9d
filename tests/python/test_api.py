"""The binding's API: devices, contexts, device arrays, models and their reports."""

import json
import unittest

import numpy as np

import clrun
from support import GraphFiles, example

CHAIN = """graph chain
input x: f32[4, 8]
const k: f32[4, 8] uniform(-1, 1) seed=7
node a: f32[4, 8] = add(x, k)
node b: f32[4, 8] = relu(a)
node y: f32[4, 8] = neg(b)
output y
"""

RANK8 = """graph rank8
input x: f32[2, 1, 3, 1, 2, 1, 3, 2]
input y: f32[1, 2, 1, 3, 1, 2, 1, 2]
node z: f32[2, 2, 3, 3, 2, 2, 3, 2] = add(x, y)
output z
"""


CONV_BN = """graph conv_bn
input x: f32[1, 3, 8, 8]
const w: f32[4, 3, 3, 3] uniform(-1, 1) seed=1
const scale: f32[4] uniform(0.5, 2) seed=2
const shift: f32[4] uniform(-1, 1) seed=3
const mean: f32[4] uniform(-1, 1) seed=4
const var: f32[4] uniform(0.5, 2) seed=5
node y: f32[1, 4, 8, 8] = conv2d(x, w) pad=[1, 1]
node z: f32[1, 4, 8, 8] = batchnorm(y, scale, shift, mean, var) eps=0.001
node out: f32[1, 4, 8, 8] = relu(z)
output out
"""


class Devices(unittest.TestCase):
    def test_lists_devices_with_one_default(self):
        devices = clrun.devices()
        self.assertGreaterEqual(len(devices), 1)
        self.assertEqual(sum(d.default for d in devices), 1)
        for d in devices:
            self.assertTrue(d.name)
            self.assertGreater(d.global_mem, 0)
            self.assertGreaterEqual(d.base_addr_align, 128)

    def test_context_on_a_chosen_device(self):
        devices = clrun.devices()
        with clrun.Context(device=devices[-1]) as ctx:
            self.assertEqual(ctx.device.index, devices[-1].index)
            self.assertEqual(ctx.device.name, devices[-1].name)


class DeviceArrays(unittest.TestCase):
    def setUp(self):
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def test_round_trip_is_bit_exact_for_every_dtype(self):
        rng = np.random.default_rng(1)
        for dtype in (np.float32, np.int32, np.float16, np.float64, np.int64, np.bool_):
            host = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
            device = self.ctx.array(host)
            self.assertEqual(device.shape, (3, 5, 7))
            self.assertEqual(device.dtype, np.dtype(dtype))
            self.assertEqual(device.nbytes, host.nbytes)
            back = device.numpy()
            self.assertEqual(back.tobytes(), host.tobytes())
            self.assertEqual(np.asarray(device).tobytes(), host.tobytes())

    def test_dtypes_are_kept_or_converted_within_their_kind(self):
        for dtype in (np.float64, np.int64, np.bool_, np.uint8, np.int8, np.int16, np.uint16,
                      np.uint32, np.uint64):
            self.assertEqual(self.ctx.array(np.ones(3, dtype)).dtype, np.dtype(dtype))
        self.assertEqual(self.ctx.array(np.ones(3, np.uint8), dtype=np.int32).dtype, np.int32)
        self.assertEqual(self.ctx.array(np.ones(3), dtype=np.float32).dtype, np.float32)
        self.assertEqual(self.ctx.array(np.arange(3), dtype=np.int32).numpy().tolist(), [0, 1, 2])
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "outside the range"):
            self.ctx.array(np.array([2**40]), dtype=np.int32)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "cannot convert complex64"):
            self.ctx.array(np.ones(3, np.complex64))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "needs int32 values"):
            self.ctx.array(np.ones(3), dtype=np.int32)

    def test_memory_is_counted_and_freed(self):
        before = self.ctx.memory_stats()["in_use"]
        device = self.ctx.array(np.zeros(1000, np.float32))
        self.assertEqual(self.ctx.memory_stats()["in_use"], before + 4000)
        device.free()
        self.assertEqual(self.ctx.memory_stats()["in_use"], before)
        device.free()  # twice is harmless
        with self.assertRaises(clrun.InvalidArgumentError):
            device.numpy()

    def test_garbage_collection_frees_the_block(self):
        before = self.ctx.memory_stats()["in_use"]
        self.ctx.array(np.zeros(1000, np.float32))  # dropped at once
        self.assertEqual(self.ctx.memory_stats()["in_use"], before)

    def test_memory_stats_has_the_c_fields(self):
        stats = self.ctx.memory_stats()
        for key in ("strategy", "in_use", "in_use_peak", "held", "reserved", "reserved_peak",
                    "alloc_count", "free_count", "driver_allocs", "driver_frees", "chunks",
                    "free_bytes", "largest_free", "fragmentation", "limit"):
            self.assertIn(key, stats)
        self.assertIn(stats["strategy"], ("buddy", "slab", "bump", "tlsf"))


class Models(GraphFiles):
    def setUp(self):
        super().setUp()
        self.ctx = clrun.Context()
        self.addCleanup(self.ctx.close)

    def test_inputs_and_outputs_are_described(self):
        model = self.ctx.load(example("mlp.graph"))
        self.assertEqual(model.name, "mlp")
        self.assertEqual(model.inputs, [clrun.TensorInfo("x", np.dtype(np.float32), (64, 784), True)])
        self.assertEqual(model.outputs, [clrun.TensorInfo("y", np.dtype(np.float32), (64, 10), False)])

    def test_fold_is_its_own_switch_and_fusion_keeps_the_bits(self):
        x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
        path = self.graph(CONV_BN)
        outs = {}
        for fold in (True, False):
            for fusion in (True, False):
                model = self.ctx.load(path, fold=fold, fusion=fusion)
                outs[fold, fusion] = model(x=x)["out"]
                self.assertEqual(model.stats()["folded_batchnorms"], 1 if fold else 0)
        for fold in (True, False):
            self.assertEqual(outs[fold, True].tobytes(), outs[fold, False].tobytes())
        largest = np.abs(outs[False, False]).max()
        self.assertLessEqual(np.abs(outs[True, True] - outs[False, False]).max(), 1e-5 * largest)
        with self.assertRaises(clrun.InvalidArgumentError):
            self.ctx.load(path, fold=1)

    def test_rank_eight_tensors_pass_both_ways(self):
        # CLRUN_MAX_DIMS is 8: the ctypes structs mirror it, so every dim comes back
        path = self.graph(RANK8)
        model = self.ctx.load(path)
        self.assertEqual(model.inputs[0].shape, (2, 1, 3, 1, 2, 1, 3, 2))
        self.assertEqual(model.outputs[0].shape, (2, 2, 3, 3, 2, 2, 3, 2))
        rng = np.random.default_rng(8)
        x = rng.standard_normal((2, 1, 3, 1, 2, 1, 3, 2)).astype(np.float32)
        y = rng.standard_normal((1, 2, 1, 3, 1, 2, 1, 2)).astype(np.float32)
        self.assertEqual(model(x=x, y=y)["z"].tobytes(), (x + y).tobytes())
        with self.assertRaises(clrun.InvalidArgumentError):
            model(x=x.reshape(1, 2, 1, 3, 1, 2, 1, 3, 2), y=y)

    def test_numpy_and_device_inputs_give_the_same_bits(self):
        model = self.ctx.load(self.graph(CHAIN))
        x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
        from_host = model(x=x)["y"]
        device = self.ctx.array(x)
        from_device = model.run({"x": device})["y"]
        self.assertEqual(from_host.tobytes(), from_device.tobytes())
        self.assertEqual(device.numpy().tobytes(), x.tobytes())  # a kept input is not written
        again = model(x=device)["y"]  # and can be passed again
        self.assertEqual(again.tobytes(), from_host.tobytes())

    def test_every_mode_gives_the_same_bits(self):
        x = self.ctx.load(example("mlp.graph")).example_inputs(seed=4)
        results = {}
        for mode in ("pooled", "planned", "naive"):
            model = self.ctx.load(example("mlp.graph"), mode=mode, plan_time_limit=0.1)
            self.assertEqual(model.mode, mode)
            results[mode] = model(x)["y"].tobytes()
            self.assertEqual(model.stats()["mode"], mode)
            model.close()
        self.assertEqual(results["pooled"], results["planned"])
        self.assertEqual(results["pooled"], results["naive"])

    def test_stats_report_peak_against_bound_and_naive(self):
        model = self.ctx.load(example("mlp.graph"))
        model(model.example_inputs())
        stats = model.stats()
        self.assertEqual(stats["graph_nodes"], 6)
        self.assertEqual(stats["steps"], stats["kernels"])  # fused groups run as one step each
        self.assertLess(stats["kernels"], 6)
        self.assertGreater(stats["peak_bytes"], 0)
        self.assertGreaterEqual(stats["peak_bytes"], stats["lower_bound_bytes"])
        self.assertGreater(stats["naive_bytes"], stats["peak_bytes"])
        self.assertAlmostEqual(stats["peak_over_lower_bound"],
                               stats["peak_bytes"] / stats["lower_bound_bytes"])
        self.assertGreater(stats["saving_over_naive"], 0)
        self.assertEqual(len(stats["unused_donated"]), stats["unused_donations"])

    def test_planned_plan_has_disjoint_offsets(self):
        model = self.ctx.load(example("gpt2_block.graph"), mode="planned", plan_time_limit=0.2)
        plan = model.plan()
        self.assertTrue(any(b["is_output"] for b in plan))
        placed = [b for b in plan if not b["is_input"]]
        self.assertTrue(placed)
        for i, a in enumerate(placed):
            self.assertIsNotNone(a["offset"])
            for b in placed[:i]:
                overlap_time = a["first"] <= b["last"] and b["first"] <= a["last"]
                overlap_bytes = (a["offset"] < b["offset"] + b["bytes"] and
                                 b["offset"] < a["offset"] + a["bytes"])
                self.assertFalse(overlap_time and overlap_bytes, (a, b))

    def test_pooled_plan_has_lifetimes_without_offsets(self):
        plan = self.ctx.load(example("mlp.graph")).plan()
        self.assertEqual([b["tensor"] for b in plan if b["is_input"]], ["x"])
        self.assertTrue(all(b["offset"] is None for b in plan))

    def test_trace_is_a_chrome_trace_with_a_span_per_node(self):
        model = self.ctx.load(self.graph(CHAIN), profile=True, fusion=False)
        with self.assertRaises(clrun.InvalidArgumentError):
            model.trace(self.path("early.json"))  # nothing ran yet
        model(x=np.ones((4, 8), np.float32))
        model.trace(self.path("trace.json"))
        with open(self.path("trace.json")) as f:
            trace = json.load(f)
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertEqual([s["name"] for s in spans], ["add", "relu", "neg"])
        self.assertEqual([s["args"]["output"] for s in spans], ["a", "b", "y"])
        self.assertTrue(all(s["dur"] >= 0 for s in spans))
        counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
        self.assertEqual(len(counters), 6)  # at each node's start and end
        self.assertEqual(max(c["args"]["bytes"] for c in counters), model.stats()["peak_bytes"])
        names = {e["name"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
        self.assertEqual(names["process_name"], "clrun chain")

    def test_trace_needs_profiling(self):
        model = self.ctx.load(self.graph(CHAIN))
        model(x=np.ones((4, 8), np.float32))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "profile=True"):
            model.trace(self.path("t.json"))

    def test_inputs_are_checked_by_name_shape_and_dtype(self):
        model = self.ctx.load(self.graph(CHAIN))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "missing input 'x'"):
            model()
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "no input 'z'"):
            model(x=np.ones((4, 8), np.float32), z=1)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, r"shape \(4, 8\), \(8, 4\) given"):
            model(x=np.ones((8, 4), np.float32))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "needs float32 values"):
            model(x=np.ones((4, 8), np.complex64))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, r"input 'x' is float32\[4, 8\]"):
            model(x=self.ctx.array(np.ones((4, 8), np.int32)))
        self.assertEqual(self.ctx.memory_stats()["in_use"], self._resident(model))

    def _resident(self, model):
        return model.stats()["constant_bytes"]

    def test_weights_are_stored_narrower_on_request(self):
        path = example("gpt2_block.graph")
        full = self.ctx.load(path)
        feeds = full.example_inputs()
        reference = full(**feeds)
        f32_bytes = self._resident(full)
        self.assertIsNone(full.weights_report)
        for weights, share, worst in (("f16", 2, 1e-3), ("bf16", 2, 1e-2), ("int8", 4, 3e-2)):
            model = self.ctx.load(path, weights=weights)
            report = model.weights_report
            self.assertEqual((report["weights"], report["narrowed"]), (weights, 4))
            self.assertLessEqual(self._resident(model), f32_bytes // share + 65536)
            for name, want in reference.items():
                got = model(**feeds)[name]
                error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                self.assertTrue(0 < error < worst, "%s %s: %g" % (weights, name, error))
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "weights is"):
            self.ctx.load(path, weights="f64")

    def test_float64_inputs_are_converted(self):
        model = self.ctx.load(self.graph(CHAIN))
        x = np.linspace(-1, 1, 32).reshape(4, 8)
        self.assertEqual(model(x=x)["y"].tobytes(), model(x=x.astype(np.float32))["y"].tobytes())

    def test_without_mode_the_contexts_allocator_decides(self):
        self.assertEqual(self.ctx.load(self.graph(CHAIN)).mode, "pooled")
        with clrun.Context(allocator="planned") as planned:
            self.assertEqual(planned.load(self.graph(CHAIN)).mode, "planned")
            self.assertEqual(planned.load(self.graph(CHAIN), mode="naive").mode, "naive")

    def test_mode_is_checked(self):
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "mode is 'pooled'"):
            self.ctx.load(self.graph(CHAIN), mode="fast")

    def test_dims_are_for_onnx(self):
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "dims="):
            self.ctx.load(self.graph(CHAIN), dims={"batch": 2})

    def test_fusion_flag_is_accepted_and_changes_no_bits(self):
        x = np.ones((4, 8), np.float32)
        fused = self.ctx.load(self.graph(CHAIN), fusion=True, profile=True)
        unfused = self.ctx.load(self.graph(CHAIN), fusion=False)
        on, off = fused(x=x)["y"], unfused(x=x)["y"]
        self.assertEqual(on.tobytes(), off.tobytes())
        stats = fused.stats()
        self.assertEqual((stats["fused_groups"], stats["graph_nodes"], stats["kernels"]), (1, 3, 1))
        self.assertEqual(unfused.stats()["kernels"], 3)
        fused.trace(self.path("fused.json"))
        with open(self.path("fused.json")) as f:
            spans = [e["name"] for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(spans, ["fused:add+relu+neg"])

    def test_closing_the_context_frees_its_models_and_arrays(self):
        ctx = clrun.Context()
        model = ctx.load(self.graph(CHAIN))
        device = ctx.array(np.ones((4, 8), np.float32))
        ctx.close()
        self.assertTrue(ctx.closed)
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            model(x=device)
        with self.assertRaises(clrun.InvalidArgumentError):
            device.numpy()
        with self.assertRaisesRegex(clrun.InvalidArgumentError, "closed"):
            ctx.memory_stats()
        model.close()
        device.free()  # both harmless after the context went
        ctx.close()

    def test_arrays_of_another_context_are_refused(self):
        model = self.ctx.load(self.graph(CHAIN))
        with clrun.Context() as other:
            foreign = other.array(np.ones((4, 8), np.float32))
            with self.assertRaisesRegex(clrun.InvalidArgumentError, "another context"):
                model(x=foreign)


if __name__ == "__main__":
    unittest.main()
