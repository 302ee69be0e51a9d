"""Pipelines: a model split into consecutive stages over several devices of this process
(clrun/pipeline.h), for a model that does not fit one device."""

import threading
import weakref
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from . import _lib
from ._context import host_feeds, host_pointers, _size
from ._model import _check_constants, _check_dims, _load_graph, _tensor_info, _tensor_list
from .errors import InvalidArgumentError, check, type_error, INVALID_ARGUMENT

StageInfo = namedtuple("StageInfo", "device device_name first_node end_node limit_bytes "
                       "estimate_bytes weights_bytes peak_bytes bytes_in bytes_out wall_ms")
StageInfo.__doc__ = """One stage of a :class:`Pipeline` and its device: the device's index in
:func:`clrun.devices`, its name, the graph nodes [first_node, end_node) it runs (in the order
they run), the pool limit the split held it to (0: none) and the split's estimate of its peak,
its weights on the device, the most its pool held at once, and for the last run the activation
bytes copied in from earlier stages and out for later ones (per micro-batch), and its busy
time in ms (summed over the micro-batches)."""

RunInfo = namedtuple("RunInfo", "micro_batches slots threads wall_ms busy_ms bubble_fraction "
                     "bytes_moved handoff_bytes")
RunInfo.__doc__ = """The last run of a :class:`Pipeline` as a whole: its micro-batches, the
hand-off slots (micro-batches whose activations may wait at once), the host threads the stages
ran on (0: stage after stage), its wall span and the stages' busy time in ms, the bubble
fraction (idle share of stage time within the span: 1 - busy / (stages x wall)), the activation
bytes moved between stages per micro-batch, and the host bytes held for activations in
flight."""


def _close(pipeline, graph):
    if pipeline:
        _lib.pipeline_destroy(pipeline)
    if graph:
        _lib.graph_destroy(graph)


class Pipeline:
    """A model cut into one stage per device, in the order its nodes run, each stage within its
    device's limit and the cut where the fewest activation bytes cross; a run runs the stages in
    order and moves the activations between them through host memory. The outputs have the bits
    one device gives (``clrun run --devices``; docs/distributed.md).

    Args:
        source: a ``.graph`` file, an ``.onnx`` model, or the bytes of an ONNX model.
        devices: the device of each stage: indices into :func:`clrun.devices` (as CLRUN_DEVICE
            counts them); one may appear twice (two contexts on it).
        limits: each device's pool limit the split holds its stage to: one size for all, or a
            list (bytes, or text such as ``"64M"``); None or 0 takes the context's own
            (CLRUN_POOL_LIMIT, else the device's memory).
        allocator: each context's allocator or executor mode (as ``clrun.Context``); None:
            CLRUN_ALLOCATOR.
        platform: the platform selector of every device; None: CLRUN_PLATFORM.
        dims, shapes, constants: ONNX only, as :meth:`clrun.Context.load` takes them (every
            dimension must be bound: a pipeline has one shape).
        plan_time_limit: planned mode: the planner's budget in seconds per stage.

    Raises clrun.NoDeviceError for a device index nobody has, clrun.OutOfMemoryError when no
    cut meets the limits (naming what the graph needs), and nothing is left allocated then."""

    def __init__(self, source, devices, *, limits=None, allocator=None, platform=None, dims=None,
                 shapes=None, constants=None, plan_time_limit=None):
        if isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
            raise type_error("devices is a list of device indices, [0, 1], not %r" % (devices,))
        devices = list(devices)
        if not devices:
            raise InvalidArgumentError(INVALID_ARGUMENT, "devices: at least one device")
        for d in devices:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < 65536:
                raise InvalidArgumentError(INVALID_ARGUMENT, "devices: %r is not a device index" % (d,))
        if limits is None or isinstance(limits, (int, np.integer, str)):
            limits = [limits] * len(devices)
        elif isinstance(limits, (bytes, Mapping)) or not hasattr(limits, "__len__"):
            raise type_error("limits is a size or a list of sizes, one per device, not %r" % (limits,))
        limits = list(limits)
        if len(limits) != len(devices):
            raise InvalidArgumentError(INVALID_ARGUMENT, "limits: %d for %d devices"
                                       % (len(limits), len(devices)))
        # None or 0: the context's own limit
        limit_array = (_lib.c_uint64 * len(devices))(
            *[0 if v is None or (not isinstance(v, (bool, str)) and v == 0) else _size(v, "limits")
              for v in limits])
        for name, value in (("allocator", allocator), ("platform", platform)):
            if value is not None and not isinstance(value, str):
                raise type_error("%s is a name (str), not %r" % (name, value))
        if plan_time_limit is not None and (isinstance(plan_time_limit, bool) or
                                            not isinstance(plan_time_limit, (int, float, np.number))):
            raise type_error("plan_time_limit is a number of seconds, not %r" % (plan_time_limit,))
        device_array = (_lib.c_uint * len(devices))(*[int(d) for d in devices])
        constants = _check_constants(constants)
        self._graph = _load_graph(source, _check_dims(dims), shapes, "Pipeline", constants)
        self._pipeline = None
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close, None, self._graph)
        exec_options = _lib.ExecOptions()
        _lib.exec_options_init(_lib.byref(exec_options))
        if plan_time_limit is not None:
            exec_options.plan_time_limit_s = float(plan_time_limit)
        options = _lib.PipelineOptions()
        _lib.pipeline_options_init(_lib.byref(options))
        options.platform = platform.encode() if platform else None
        options.allocator = allocator.encode() if allocator else None
        options.exec = _lib.ctypes.pointer(exec_options)
        pointer = _lib.c_void_p()
        status = _lib.pipeline_create(self._graph, device_array, limit_array, len(devices),
                                      _lib.byref(options), _lib.byref(pointer))
        if status:
            self.close()
            check(status)
        self._pipeline = pointer
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close, self._pipeline, self._graph)
        self.inputs = [_tensor_info(self._graph, t, False)
                       for t in _tensor_list(self._graph, _lib.graph_inputs)]
        self.outputs = [_tensor_info(self._graph, t, False)
                        for t in _tensor_list(self._graph, _lib.graph_outputs)]

    def close(self):
        """Frees every stage (contexts, executors); the pipeline cannot run after."""
        with self._lock:
            self._finalizer()
            self._pipeline = None
            self._graph = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _require_open(self):
        if not self._pipeline:
            raise InvalidArgumentError(INVALID_ARGUMENT, "the pipeline is closed")

    def run(self, feeds=None, *, micro_batches=None, **named):
        """Runs the model once over the stages; returns {output name: numpy array}. Inputs are
        given by name, as a dict or keywords (numpy arrays or what numpy makes one of), each of
        the input's shape; a value of another kind is refused as :meth:`clrun.Model.run`
        refuses it.

        With ``micro_batches=M``, each input has a leading axis of M (shape ``(M, *shape)``):
        the M micro-batches stream through the stages, a thread per stage, stage s running
        micro-batch i while stage s + 1 runs i - 1; each output has the leading axis M too, its
        block j the bits a run of block j alone gives. :attr:`last_run` tells how it went."""
        if micro_batches is not None and (isinstance(micro_batches, bool) or
                                          not isinstance(micro_batches, (int, np.integer))):
            raise type_error("micro_batches is a count (int), not %r" % (micro_batches,))
        if micro_batches is not None and micro_batches < 1:
            raise InvalidArgumentError(INVALID_ARGUMENT, "micro_batches: %d: at least 1"
                                       % micro_batches)
        lead = () if micro_batches is None else (int(micro_batches),)
        arrays = host_feeds(
            feeds, named, self.inputs, lambda info: lead + tuple(info.shape),
            lambda info, shape: "input '%s' has shape %s, the model's is %s%s"
            % (info.name, shape, info.shape, " with a leading axis of %d micro-batches, %s"
               % (lead[0], lead + tuple(info.shape)) if lead else ""))
        pointers, sizes = host_pointers(arrays)
        if lead:
            out = {info.name: np.empty(lead + tuple(info.shape), info.dtype) for info in self.outputs}
            results = [out[info.name] for info in self.outputs]
            out_pointers, out_sizes = host_pointers(results)
            with self._lock:
                self._require_open()
                check(_lib.pipeline_run_many(self._pipeline, lead[0], pointers, sizes, len(arrays),
                                             out_pointers, out_sizes, len(results)))
            return out
        with self._lock:
            self._require_open()
            check(_lib.pipeline_run(self._pipeline, pointers, sizes, len(arrays)))
            out = {}
            for i, info in enumerate(self.outputs):
                array = np.empty(info.shape, info.dtype)
                check(_lib.pipeline_read_output(self._pipeline, i, array.ctypes.data, array.nbytes))
                out[info.name] = array
        return out

    @property
    def stages(self):
        """Each stage as a :class:`StageInfo`, as the split decided and the last run went."""
        with self._lock:
            self._require_open()
            result = []
            for k in range(_lib.pipeline_stage_count(self._pipeline)):
                info = _lib.PipelineStageInfo()
                check(_lib.pipeline_stage_info_get(self._pipeline, k, _lib.byref(info)))
                result.append(StageInfo(info.device, _lib.text(info.device_name), info.first_node,
                                        info.end_node, info.limit_bytes, info.estimate_bytes,
                                        info.weights_bytes, info.peak_bytes, info.bytes_in,
                                        info.bytes_out, info.wall_ms))
            return result

    @property
    def last_run(self):
        """The last run as a :class:`RunInfo` (micro-batches, bubble fraction, bytes moved)."""
        with self._lock:
            self._require_open()
            info = _lib.PipelineRunInfo()
            check(_lib.pipeline_run_info_get(self._pipeline, _lib.byref(info)))
            return RunInfo(info.micro_batches, info.slots, info.threads, info.wall_ms, info.busy_ms,
                           info.bubble_fraction, info.bytes_moved, info.handoff_bytes)

    def __repr__(self):
        if not self._pipeline:
            return "<clrun.Pipeline (closed)>"
        return "<clrun.Pipeline over devices %s>" % [s.device for s in self.stages]
