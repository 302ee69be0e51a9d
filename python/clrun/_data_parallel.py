"""Data-parallel inference: the batch split over several devices of this process, each running
the whole model on its share of the rows (clrun/run_parallel.h)."""

import threading
import weakref
from collections import namedtuple

import numpy as np

from . import _lib
from ._context import host_feeds, host_pointers, _size
from ._model import (_check_constants, _check_dims, _check_shapes, _is_bytes, _load_graph,
                     _tensor_info, _tensor_list)
from .errors import InvalidArgumentError, check, type_error, INVALID_ARGUMENT

ShareInfo = namedtuple("ShareInfo", "device device_name first_row rows weights_bytes peak_bytes "
                       "run_peak_bytes wall_ms run_ms")
ShareInfo.__doc__ = """One device of a :class:`DataParallel` and its share: the device's index in
:func:`clrun.devices`, its name, its rows [first_row, first_row + rows) of the global batch, its
weights on the device, the most its pool held at once (weights, inputs, activations), and for
the last run its executor's peak, the wall time of its copies and run, and its executor's run
alone, in ms."""


def _close(parallel, graphs):
    if parallel:
        _lib.run_parallel_destroy(parallel)
    for graph in graphs:
        _lib.graph_destroy(graph)


def _share(batch, count, k):
    """The rows of share k: the library's one split (clrun_train_parallel_share), batch // count
    rows, one more on the first batch % count shares."""
    rows = _lib.c_int64()
    check(_lib.train_parallel_share(batch, count, k, None, _lib.byref(rows)))
    return rows.value


class DataParallel:
    """A model run data-parallel over several devices: each device runs the whole model on its
    share of the global batch (``batch // N`` rows, one more on the first ``batch % N``
    devices), all at once, a thread each, and the outputs come back at the global batch in row
    order, the bits one device gives (``clrun run --devices --data-parallel``;
    docs/distributed.md).

    Args:
        source: an ``.onnx`` model (or its bytes) whose batch is open, bound to the global batch
            by ``dims`` or ``shapes`` (the first dimension of its first input): it is loaded
            again at each device's share; or a ``.graph`` file, whose batch is each device's
            share (the global batch N times it).
        devices: the device of each share: indices into :func:`clrun.devices`; one may appear
            twice (two contexts on it, two shares).
        allocator: each context's allocator or executor mode; None: CLRUN_ALLOCATOR.
        platform: the platform selector of every device; None: CLRUN_PLATFORM.
        pool_limit: each device's pool limit (bytes, or text such as ``"64M"``); None: the
            context's own.
        fusion: True or False to fuse elementwise kernels or not; None: CLRUN_FUSION.
        dims, shapes, constants: ONNX only, as :meth:`clrun.Context.load` takes them.
        plan_time_limit: planned mode: the planner's budget in seconds per device.

    An input whose first dimension is the batch is split; any other input goes whole to every
    device. An output without the batch dimension is refused (its shares cannot be put
    together). Raises clrun.NoDeviceError for a device index nobody has, and nothing is left
    allocated then."""

    def __init__(self, source, devices, *, allocator=None, platform=None, pool_limit=None,
                 fusion=None, dims=None, shapes=None, constants=None, plan_time_limit=None):
        if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
            raise type_error("devices is a list of device indices, [0, 1], not %r" % (devices,))
        devices = list(devices)
        if not devices:
            raise InvalidArgumentError(INVALID_ARGUMENT, "devices: at least one device")
        for d in devices:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < 65536:
                raise InvalidArgumentError(INVALID_ARGUMENT, "devices: %r is not a device index" % (d,))
        for name, value in (("allocator", allocator), ("platform", platform)):
            if value is not None and not isinstance(value, str):
                raise type_error("%s is a name (str), not %r" % (name, value))
        if fusion is not None and not isinstance(fusion, bool):
            raise type_error("fusion is True, False or None, not %r" % (fusion,))
        if plan_time_limit is not None and (isinstance(plan_time_limit, bool) or
                                            not isinstance(plan_time_limit, (int, float, np.number))):
            raise type_error("plan_time_limit is a number of seconds, not %r" % (plan_time_limit,))
        limit = 0 if pool_limit is None else _size(pool_limit, "pool_limit")
        dims, shapes = _check_dims(dims), _check_shapes(shapes)
        constants = _check_constants(constants)
        onnx = _is_bytes(source) or str(source).endswith(".onnx")
        self._parallel = None
        self._graphs = []
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close, None, self._graphs)
        whole = _load_graph(source, dims, shapes, "DataParallel", constants)
        self._graphs.append(whole)
        models = [whole] * len(devices)
        if onnx:
            models = self._share_models(source, whole, len(devices), dims, shapes, constants)
        exec_options = _lib.ExecOptions()
        _lib.exec_options_init(_lib.byref(exec_options))
        if plan_time_limit is not None:
            exec_options.plan_time_limit_s = float(plan_time_limit)
        if fusion is not None:
            exec_options.fusion = 1 if fusion else -1
        options = _lib.RunParallelOptions()
        _lib.run_parallel_options_init(_lib.byref(options))
        options.platform = platform.encode() if platform else None
        options.allocator = allocator.encode() if allocator else None
        options.pool_limit = limit
        options.exec = _lib.ctypes.pointer(exec_options)
        model_array = (_lib.graph_p * len(devices))(*models)
        device_array = (_lib.c_uint * len(devices))(*[int(d) for d in devices])
        pointer = _lib.c_void_p()
        status = _lib.run_parallel_create(model_array, device_array, len(devices),
                                          _lib.byref(options), _lib.byref(pointer))
        if status:
            self.close()
            check(status)
        self._parallel = pointer
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close, self._parallel, self._graphs)
        self.batch = _lib.run_parallel_batch(self._parallel)
        first = models[0]
        self.inputs = []
        for i, t in enumerate(_tensor_list(first, _lib.graph_inputs)):
            info = _tensor_info(first, t, False)
            share = np.dtype(info.dtype).itemsize * int(np.prod(info.shape, dtype=np.int64))
            if _lib.run_parallel_input_bytes(self._parallel, i) != share:  # split: the rows
                info = info._replace(shape=(self.batch,) + tuple(info.shape[1:]))
            self.inputs.append(info)
        self.outputs = [_tensor_info(first, t, False)._replace(
            shape=(self.batch,) + tuple(_tensor_info(first, t, False).shape[1:]))
            for t in _tensor_list(first, _lib.graph_outputs)]

    def _share_models(self, source, whole, count, dims, shapes, constants):
        """The ONNX model at each device's share: every binding of the global batch (a dim of
        its value, the first dimension of a shape, of an input the model has at it) bound to
        the share; one load per distinct share."""
        ids = _tensor_list(whole, _lib.graph_inputs)
        first = _tensor_info(whole, ids[0], False) if ids else None
        if first is None or not first.shape:
            raise InvalidArgumentError(INVALID_ARGUMENT, "DataParallel: the model has no input with "
                                       "a batch dimension (its first input's first dimension)")
        batch = first.shape[0]
        by_rows, models = {batch: whole}, []
        for k in range(count):
            rows = _share(batch, count, k)
            if rows not in by_rows:
                d = {n: rows if v == batch else v for n, v in dims.items()}
                s = {n: (rows,) + v[1:] if v and v[0] == batch else v for n, v in shapes.items()}
                for t in ids:
                    info = _tensor_info(whole, t, False)
                    if info.shape and info.shape[0] == batch and info.name not in s:
                        s[info.name] = (rows,) + tuple(info.shape[1:])
                by_rows[rows] = _load_graph(source, d, s, "DataParallel", constants)
                self._graphs.append(by_rows[rows])
            models.append(by_rows[rows])
        return models

    def close(self):
        """Frees every device's executor and context; the runner cannot run after."""
        with self._lock:
            self._finalizer()
            self._parallel = None
            self._graphs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _require_open(self):
        if not self._parallel:
            raise InvalidArgumentError(INVALID_ARGUMENT, "the data-parallel runner is closed")

    def run(self, feeds=None, **named):
        """Runs every device on its rows; returns {output name: numpy array} at the global batch.
        Inputs are given by name, as a dict or keywords, at the global batch (:attr:`inputs`
        gives their shapes)."""
        arrays = host_feeds(
            feeds, named, self.inputs, lambda info: info.shape,
            lambda info, shape: "input '%s' has shape %s, the global batch's is %s"
            % (info.name, shape, info.shape))
        out = {info.name: np.empty(info.shape, info.dtype) for info in self.outputs}
        results = [out[info.name] for info in self.outputs]
        pointers, sizes = host_pointers(arrays)
        out_pointers, out_sizes = host_pointers(results)
        with self._lock:
            self._require_open()
            check(_lib.run_parallel_run(self._parallel, pointers, sizes, len(arrays), out_pointers,
                                        out_sizes, len(results)))
        return out

    __call__ = run

    @property
    def shares(self):
        """Each device's share as a :class:`ShareInfo`, as created and as the last run went."""
        with self._lock:
            self._require_open()
            result = []
            for k in range(_lib.run_parallel_count(self._parallel)):
                info = _lib.RunParallelDeviceInfo()
                check(_lib.run_parallel_device_info_get(self._parallel, k, _lib.byref(info)))
                result.append(ShareInfo(info.device, _lib.text(info.device_name), info.first_row,
                                        info.rows, info.weights_bytes, info.peak_bytes,
                                        info.run_peak_bytes, info.wall_ms, info.run_ms))
            return result

    @property
    def wall_ms(self):
        """The last run's wall span in ms, first device's start to last device's end."""
        with self._lock:
            self._require_open()
            return _lib.run_parallel_wall_ms(self._parallel)

    def __repr__(self):
        if not self._parallel:
            return "<clrun.DataParallel (closed)>"
        return "<clrun.DataParallel over devices %s, batch %d>" % (
            [s.device for s in self.shares], self.batch)
