#!/usr/bin/python3
"""NonMaxSuppression, MaxPool's Indices output and MaxUnpool through clrun (`clrun run MODEL.onnx
--input ... --output-dir`):

  nms          single nodes built here with the onnx package against a numpy reference of
               onnxruntime's algorithm (per batch, per class, by descending score, equal
               scores by the lower index; a box is kept unless its IoU with a kept one exceeds
               the threshold): corners in either order, center_point_box 1, a score threshold,
               several batches and classes, a max count that limits, equal scores, opsets 10
               and 11. Boxes and scores fed at run time run on the device: the output has
               B C min(max, N) rows, the kept ones first, then rows of -1; the same model with
               boxes and scores as initializers is evaluated at load: exactly the kept rows.
  maxpool      MaxPool with Indices (1-D and 2-D; storage_order 0 and 1; strides, pads,
               dilations, ceil_mode; Y left unnamed) and MaxUnpool (with and without output_shape) against
               numpy
  bad input    boxes and scores that disagree, a negative max count, a center_point_box of 2,
               a storage_order of 2: refused, naming the node
  torch        a detection head exported by torch.onnx.export (opsets 11 and 17): a conv
               whose outputs are boxes and scores, NMS (torchvision.ops.nms where this python3
               has torchvision, else an autograd Function whose symbolic is the same
               NonMaxSuppression node torchvision writes), then the kept boxes and scores
               gathered; against torch's own outputs (indices exactly, values within 1e-4)

Outputs bit-identical under the buddy and planned allocators. The torch cases are skipped,
saying so, when this python3 has no torch. Usage: onnx_detect.py CLRUN WORKDIR"""
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_common import some_modes

RNG = np.random.default_rng(20261204)
MODES = some_modes(["buddy", "planned"])
TOLERANCE = 1e-4

# ---- the numpy references ----


def extent(b, center):
    b = b.astype(np.float32)
    if center:
        hw, hh = b[2] / np.float32(2), b[3] / np.float32(2)
        return b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw
    return min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])


def suppresses(a, b, center, threshold):
    ay0, ax0, ay1, ax1 = extent(a, center)
    by0, bx0, by1, bx1 = extent(b, center)
    ix0, ix1 = max(ax0, bx0), min(ax1, bx1)
    iy0, iy1 = max(ay0, by0), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = np.float32((ix1 - ix0) * (iy1 - iy0))
    area_a, area_b = np.float32((ax1 - ax0) * (ay1 - ay0)), np.float32((bx1 - bx0) * (by1 - by0))
    union = np.float32(area_a + area_b - inter)
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return np.float32(inter / union) > np.float32(threshold)


def nms_reference(boxes, scores, max_out, iou, score_threshold, center):
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = sorted((i for i in range(len(s))
                            if score_threshold is None or s[i] > np.float32(score_threshold)),
                           key=lambda i: (-s[i], i))
            kept = []
            for i in order:
                if len(kept) >= max_out:
                    break
                if not any(suppresses(boxes[b, k], boxes[b, i], center, iou) for k in kept):
                    kept.append(i)
            rows += [[b, c, k] for k in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def pool_reference(x, kernel, strides, pads, dilations, ceil_mode, storage_order):
    """onnxruntime's MaxPool with Indices over [N, C, H, W]: the first strictly greater tap."""
    n, c, h, w = x.shape
    out = []
    for i in range(2):
        size = [h, w][i] + pads[i] + pads[2 + i] - dilations[i] * (kernel[i] - 1) - 1
        count = (-(-size // strides[i]) if ceil_mode else size // strides[i]) + 1
        if ceil_mode and (count - 1) * strides[i] >= [h, w][i] + pads[i]:
            count -= 1
        out.append(count)
    y = np.zeros((n, c, out[0], out[1]), np.float32)
    ind = np.zeros(y.shape, np.int64)
    for p in range(n * c):
        plane = x.reshape(n * c, h, w)[p]
        for oh in range(out[0]):
            for ow in range(out[1]):
                best, at = -np.inf, None
                for kh in range(kernel[0]):
                    ih = oh * strides[0] - pads[0] + kh * dilations[0]
                    for kw in range(kernel[1]):
                        iw = ow * strides[1] - pads[1] + kw * dilations[1]
                        if 0 <= ih < h and 0 <= iw < w and (at is None or plane[ih, iw] > best):
                            best, at = plane[ih, iw], (ih, iw)
                y.reshape(n * c, *out)[p, oh, ow] = best
                flat = at[1] * h + at[0] if storage_order else at[0] * w + at[1]
                ind.reshape(n * c, *out)[p, oh, ow] = p * h * w + flat
    return y, ind


# ---- models ----


def single(name, op, opset, inputs, outputs, initializers=(), **attrs):
    """inputs: (name, array, fed); outputs: (name, elem type, rank)."""
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], name=name + "_node", **attrs)
    graph_inputs = [helper.make_tensor_value_info(i[0], onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[i[1].dtype], i[1].shape)
                    for i in inputs if i[2] and i[0]]
    inits = [numpy_helper.from_array(i[1], i[0]) for i in inputs if not i[2] and i[0]]
    graph_outputs = [helper.make_tensor_value_info(o[0], o[1], None) for o in outputs if o[0]]
    graph = helper.make_graph([node], name, graph_inputs, graph_outputs, inits + list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def random_boxes(batches, count, center=False, flip=False):
    xy = RNG.uniform(0, 10, (batches, count, 2)).astype(np.float32)
    wh = RNG.uniform(0.5, 4, (batches, count, 2)).astype(np.float32)
    if center:
        return np.concatenate([xy, wh], axis=2)
    boxes = np.concatenate([xy, xy + wh], axis=2)
    if flip:
        boxes = boxes[:, :, [2, 3, 0, 1]]
    return np.ascontiguousarray(boxes)


def nms_cases():
    specs = [
        # name, opset, batches, classes, boxes, max, iou, score threshold, center, flip
        ("nms_basic", 11, 1, 1, 12, 5, 0.5, None, 0, False),
        ("nms_flipped_scored", 11, 1, 2, 16, 10, 0.3, 0.4, 0, True),
        ("nms_center_batches", 10, 3, 2, 10, 4, 0.4, None, 1, False),
        ("nms_unlimited", 11, 2, 3, 20, 2**62, 0.6, 0.1, 0, False),
        ("nms_equal_scores", 11, 1, 1, 8, 8, 0.2, None, 0, False),
    ]
    for name, opset, b, c, n, max_out, iou, score, center, flip in specs:
        boxes = random_boxes(b, n, center=bool(center), flip=flip)
        scores = RNG.uniform(0, 1, (b, c, n)).astype(np.float32)
        if name == "nms_equal_scores":
            scores[:] = 0.5
        want = nms_reference(boxes, scores, max_out, iou, score, center)
        for fed in (True, False):
            inputs = [("boxes", boxes, fed), ("scores", scores, fed),
                      ("max", np.array([max_out], np.int64), False), ("iou", np.array([iou], np.float32), False)]
            if score is not None:
                inputs.append(("score", np.array([score], np.float32), False))
            model = single(name, "NonMaxSuppression", opset, inputs, [("selected", TensorProto.INT64, 2)],
                           center_point_box=center)
            feeds = {"boxes": boxes, "scores": scores} if fed else {}
            yield (name + ("_device" if fed else "_at_load"), model, feeds, {"selected": want},
                   b * c * min(max_out, n) if fed else None)


def pool_cases():
    specs = [
        # name, shape, kernel, strides, pads, dilations, ceil, storage order
        ("maxpool_indices_2d", (2, 3, 7, 6), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 0),
        ("maxpool_indices_column_major", (1, 2, 5, 7), [2, 3], [1, 2], [0, 1, 1, 0], [1, 1], 0, 1),
        ("maxpool_indices_dilated_ceil", (1, 2, 9, 8), [2, 2], [2, 3], [0, 0, 0, 0], [2, 2], 1, 0),
    ]
    for name, shape, kernel, strides, pads, dilations, ceil, order in specs:
        x = RNG.standard_normal(shape).astype(np.float32)
        x[0, 0, 1, 1] = x[0, 0, 1, 2]  # equal values: the first wins
        y, ind = pool_reference(x, kernel, strides, pads, dilations, ceil, order)
        model = single(name, "MaxPool", 12, [("x", x, True)],
                       [("y", TensorProto.FLOAT, 4), ("i", TensorProto.INT64, 4)], kernel_shape=kernel,
                       strides=strides, pads=pads, dilations=dilations, ceil_mode=ceil, storage_order=order)
        yield name, model, {"x": x}, {"y": y, "i": ind}, None
    x = RNG.standard_normal((2, 3, 11)).astype(np.float32)
    y, ind = pool_reference(x[:, :, None, :], [1, 3], [1, 2], [0, 1, 0, 0], [1, 1], 0, 0)
    model = single("maxpool_indices_1d", "MaxPool", 12, [("x", x, True)],
                   [("y", TensorProto.FLOAT, 3), ("i", TensorProto.INT64, 3)], kernel_shape=[3], strides=[2],
                   pads=[1, 0])
    yield "maxpool_indices_1d", model, {"x": x}, {"y": y[:, :, 0], "i": ind[:, :, 0]}, None
    model = single("maxpool_indices_1d_values_unnamed", "MaxPool", 12, [("x", x, True)],
                   [("", TensorProto.FLOAT, 3), ("i", TensorProto.INT64, 3)], kernel_shape=[3], strides=[2],
                   pads=[1, 0])
    yield "maxpool_indices_1d_values_unnamed", model, {"x": x}, {"i": ind[:, :, 0]}, None
    # MaxUnpool of a MaxPool's outputs, into the unpooled size and into a given larger one
    x = RNG.standard_normal((2, 2, 4, 4)).astype(np.float32)
    y, ind = pool_reference(x, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 0, 0)
    for shape in (None, (2, 2, 5, 5)):
        unpooled = np.zeros(x.shape, np.float32)  # indices are into the unpooled size
        unpooled.reshape(-1)[ind.reshape(-1)] = y.reshape(-1)
        out = np.zeros(shape or x.shape, np.float32)  # output_shape: zeros after it
        out[:, :, :4, :4] = unpooled
        inputs = [("y", y, True), ("i", ind, True)]
        if shape:
            inputs.append(("shape", np.array(shape, np.int64), False))
        name = "maxunpool_output_shape" if shape else "maxunpool"
        model = single(name, "MaxUnpool", 11, inputs, [("z", TensorProto.FLOAT, 4)], kernel_shape=[2, 2],
                       strides=[2, 2])
        yield name, model, {"y": y, "i": ind}, {"z": out}, None


def bad_cases():
    boxes = random_boxes(1, 6)
    scores = RNG.uniform(0, 1, (1, 1, 6)).astype(np.float32)
    common = [("max", np.array([3], np.int64), False), ("iou", np.array([0.5], np.float32), False)]
    yield ("nms_shapes_disagree",
           single("bad1", "NonMaxSuppression", 11, [("boxes", boxes, True), ("scores", scores[:, :, :5], True)] + common,
                  [("s", TensorProto.INT64, 2)]), "boxes are [1, 6, 4] and scores [1, 1, 5]")
    yield ("nms_negative_max",
           single("bad2", "NonMaxSuppression", 11, [("boxes", boxes, True), ("scores", scores, True),
                                                    ("max", np.array([-1], np.int64), False)] + common[1:],
                  [("s", TensorProto.INT64, 2)]), "max_output_boxes_per_class is -1")
    yield ("nms_center_point_box",
           single("bad3", "NonMaxSuppression", 11, [("boxes", boxes, True), ("scores", scores, True)] + common,
                  [("s", TensorProto.INT64, 2)], center_point_box=2), "center_point_box is 2")
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    yield ("maxpool_storage_order",
           single("bad4", "MaxPool", 12, [("x", x, True)], [("y", TensorProto.FLOAT, 4), ("i", TensorProto.INT64, 4)],
                  kernel_shape=[2, 2], storage_order=2), "storage_order is 2")


# ---- the torch cases ----


def torch_cases(work):
    try:
        import torch
    except ImportError as e:
        print(f"SKIP torch: {sys.executable} cannot import torch ({e})")
        return
    torch.manual_seed(2026)
    try:
        import torchvision
        nms, how = torchvision.ops.nms, "torchvision.ops.nms"
    except ImportError:
        nms, how = None, "an autograd Function exporting NonMaxSuppression (no torchvision here)"

    class GreedyNMS(torch.autograd.Function):
        """torchvision.ops.nms's semantics in torch, exported as torchvision exports it."""

        @staticmethod
        def forward(ctx, boxes, scores, iou):
            order = torch.sort(scores, descending=True, stable=True).indices
            x0, y0, x1, y1 = boxes.unbind(1)
            area = (x1 - x0) * (y1 - y0)
            kept = []
            for i in order.tolist():
                ok = True
                for k in kept:
                    w = (torch.min(x1[i], x1[k]) - torch.max(x0[i], x0[k])).clamp(min=0)
                    h = (torch.min(y1[i], y1[k]) - torch.max(y0[i], y0[k])).clamp(min=0)
                    inter = w * h
                    if inter / (area[i] + area[k] - inter) > iou:
                        ok = False
                        break
                if ok:
                    kept.append(i)
            return torch.tensor(kept, dtype=torch.int64)

        @staticmethod
        def symbolic(g, boxes, scores, iou):
            boxes = g.op("Reshape", boxes, g.op("Constant", value_t=torch.tensor([1, -1, 4])))
            scores = g.op("Reshape", scores, g.op("Constant", value_t=torch.tensor([1, 1, -1])))
            max_out = g.op("Constant", value_t=torch.tensor([sys.maxsize], dtype=torch.long))
            thr = g.op("Constant", value_t=torch.tensor([iou], dtype=torch.float))
            out = g.op("NonMaxSuppression", boxes, scores, max_out, thr)
            col = g.op("Gather", out, g.op("Constant", value_t=torch.tensor([2])), axis_i=1)
            return g.op("Reshape", col, g.op("Constant", value_t=torch.tensor([-1])))

    class Head(torch.nn.Module):
        """A conv over a feature map: 4 box offsets and a score per cell; NMS; the kept boxes."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 5, 3, padding=1)

        def forward(self, features):
            out = self.conv(features)[0].flatten(1).t()  # [cells, 5]
            cells = out.shape[0]
            grid = torch.arange(cells, dtype=torch.float32)
            cx, cy = (grid % 6) * 2.0, torch.div(grid, 6, rounding_mode="floor") * 2.0
            wh = torch.exp(out[:, 2:4]) * 3.0
            boxes = torch.stack([cx + out[:, 0] - wh[:, 0], cy + out[:, 1] - wh[:, 1],
                                 cx + out[:, 0] + wh[:, 0], cy + out[:, 1] + wh[:, 1]], dim=1)
            scores = torch.sigmoid(out[:, 4])
            keep = nms(boxes, scores, 0.3) if nms else GreedyNMS.apply(boxes, scores, 0.3)
            return keep, boxes[keep], scores[keep]

    head = Head().eval()
    features = torch.randn(1, 8, 5, 6)
    with torch.no_grad():
        want = [t.numpy() for t in head(features)]
    for opset in (11, 17):
        path = os.path.join(work, f"torch_nms_head_{opset}.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(head, (features,), path, input_names=["features"],
                              output_names=["keep", "boxes", "scores"], opset_version=opset)
        print(f"torch opset {opset}: NMS by {how}, {len(want[0])} of 30 boxes kept")
        yield (f"torch_nms_head_opset{opset}", onnx.load(path), {"features": features.numpy()},
               dict(zip(["keep", "boxes", "scores"], want)), 30)


# ---- running ----


def clrun_run(clrun, folder, path, inputs, mode):
    args = []
    for key, value in inputs.items():
        np.save(os.path.join(folder, key + ".npy"), value)
        args += ["--input", f"{key}={os.path.join(folder, key + '.npy')}"]
    out = os.path.join(folder, "out-" + mode)
    proc = subprocess.run([clrun, "run", path, "--allocator", mode, "--repeat", "1", "--output-dir", out] + args,
                          capture_output=True, text=True)
    return proc, out


def run_model(clrun, work, name, model, inputs, expected, capacity):
    """capacity: the rows a run-time output of NMS has (kept rows, then -1); None: exact."""
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    results = {}
    for mode in MODES:
        proc, out = clrun_run(clrun, folder, path, inputs, mode)
        if proc.returncode != 0:
            print(f"FAIL {name} ({mode}): exit {proc.returncode}: {proc.stderr.strip()}")
            return False
        results[mode] = {k: np.load(os.path.join(out, k + ".npy")) for k in expected}
    ok, worst = True, 0.0
    for key, want in expected.items():
        got = results[MODES[0]][key]
        rows = want.shape[0]
        if capacity is not None:
            if got.shape[0] != capacity or got.shape[1:] != want.shape[1:]:
                print(f"FAIL {name}: output {key} has shape {got.shape}, expected {capacity} rows of {want.shape[1:]}")
                return False
            if got.dtype == np.int64 and not (got[rows:] == -1).all():
                print(f"FAIL {name}: output {key}'s rows past the {rows} kept are not all -1: {got[rows:]}")
                ok = False
            got = got[:rows]
        elif got.shape != want.shape:
            print(f"FAIL {name}: output {key} has shape {got.shape}, expected {want.shape}")
            return False
        if got.dtype.kind in "iu" or want.dtype.kind in "iu":
            if got.dtype != want.dtype or not np.array_equal(got, want):
                print(f"FAIL {name}: output {key} is\n{got}\nexpected\n{want}")
                ok = False
        else:
            err = np.abs(got.astype(np.float64) - want).max(initial=0) / max(np.abs(want).max(initial=0), 1.0)
            worst = max(worst, err)
            if not err <= TOLERANCE:
                print(f"FAIL {name}: output {key} differs from the reference by {err:.3g}")
                ok = False
        for mode in MODES[1:]:
            if results[mode][key].tobytes() != results[MODES[0]][key].tobytes():
                print(f"FAIL {name}: output {key} under {mode} differs from {MODES[0]} (not bit-identical)")
                ok = False
    if ok:
        shape = f"{capacity} rows, {rows} kept" if capacity is not None else "exact shape"
        print(f"PASS {name}: {', '.join(expected)} ({shape}) within {worst:.2g} of the reference, identical "
              f"in {', '.join(MODES)}")
    return ok


def run_bad(clrun, work, name, model, message):
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    inputs = {i.name: np.zeros([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
              for i in model.graph.input}
    proc, _ = clrun_run(clrun, folder, path, inputs, MODES[0])
    node = model.graph.node[0].name
    if proc.returncode == 0 or message not in proc.stderr or node not in proc.stderr:
        print(f"FAIL {name}: expected a refusal naming '{node}' and saying '{message}', got exit "
              f"{proc.returncode}: {proc.stderr.strip()}")
        return False
    print(f"PASS {name}: refused: {proc.stderr.strip().splitlines()[-1]}")
    return True


def main():
    clrun, work = sys.argv[1], sys.argv[2]
    ok = True
    for cases in (nms_cases(), pool_cases(), torch_cases(work)):
        for name, model, inputs, expected, capacity in cases:
            ok = run_model(clrun, work, name, model, inputs, expected, capacity) and ok
    for name, model, message in bad_cases():
        ok = run_bad(clrun, work, name, model, message) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
