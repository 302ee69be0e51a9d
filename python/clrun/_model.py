"""Models: a graph prepared for a context (an executor), run on numpy or device arrays."""

import json
import os
import weakref
from collections import namedtuple

import numpy as np

from . import _lib
from ._context import DTYPES, DeviceArray, as_host_array
from .errors import (InvalidArgumentError, UnsupportedError, check, error,
                     INVALID_ARGUMENT, DONATED, UNSUPPORTED)

TensorInfo = namedtuple("TensorInfo", "name dtype shape donated")
TensorInfo.__doc__ = """A model input or output: its name, numpy dtype, shape (a tuple) and,
for inputs, whether each run consumes its device memory (donated; always False for outputs)."""


class _ModelState:
    """The C graph and executor of a model, freed by close() or with the context."""

    def __init__(self, context, name):
        self.context = context
        self.name = name
        self.graph = None
        self.exec = None

    def close(self):
        if self.exec:
            _lib.exec_destroy(self.exec)
            self.exec = None
        if self.graph:
            _lib.graph_destroy(self.graph)
            self.graph = None
        self.context.forget(self)


def _load_graph(path, dims):
    """Parses a .graph file or imports an ONNX model; returns the C graph."""
    graph = _lib.graph_p()
    if os.fspath(path).endswith(".onnx"):
        if _lib.graph_load_onnx is None:
            raise UnsupportedError(UNSUPPORTED, "%s: this libclrun has no ONNX import "
                                   "(clrun_graph_load_onnx); load a .graph file" % path)
        if dims:
            raise UnsupportedError(UNSUPPORTED, "%s: dims= is not supported by this binding's "
                                   "ONNX import yet" % path)
        check(_lib.graph_load_onnx(os.fsencode(path), None, _lib.byref(graph)))
        return graph
    if dims:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s: dims= binds the symbolic dimensions "
                                   "of ONNX models; a .graph file has fixed shapes" % path)
    message = _lib.ctypes.create_string_buffer(2048)
    status = _lib.graph_load(os.fsencode(path), _lib.byref(graph), message, len(message))
    check(status, message=_lib.text(message.value))
    return graph


def _tensor_info(graph, tensor, donated):
    t = _lib.graph_tensor_type(graph, tensor).contents
    return TensorInfo(_lib.text(_lib.graph_tensor_name(graph, tensor)), DTYPES[t.dtype],
                      tuple(t.shape[d] for d in range(t.rank)), donated)


def _tensor_list(graph, listing):
    ids = _lib.POINTER(_lib.c_int32)()
    n = listing(graph, _lib.byref(ids))
    return [ids[i] for i in range(n)]


class Model:
    """A model loaded by :meth:`clrun.Context.load`, ready to run on its context.

    Attributes:
        name: the graph's name.
        mode: "pooled", "planned" or "naive".
        inputs, outputs: lists of :class:`TensorInfo` (name, dtype, shape, donated).

    Call it with the inputs by name, ``model(x=array)``, or ``model.run({"x": array})``: numpy
    arrays are uploaded for the run, :class:`DeviceArray` values are used in place; the result
    is a dict of numpy arrays by output name. Free it with :meth:`close` (or garbage
    collection, or with its context).
    """

    def __init__(self, context, path, dims=None, fusion=None, mode=None, donate=None,
                 profile=False, plan_time_limit=None):
        self._context = context
        pointer = context._pointer()
        mode = _mode(mode)
        if fusion is not None and not isinstance(fusion, bool):
            raise InvalidArgumentError(INVALID_ARGUMENT, "fusion is True, False or None")
        self._state = _ModelState(context._state, os.fspath(path))
        context._state.adopt(self._state)
        self._finalizer = weakref.finalize(self, _ModelState.close, self._state)
        try:
            self._state.graph = graph = _load_graph(path, dims)
            self.name = _lib.text(_lib.graph_name(graph)) or os.path.basename(os.fspath(path))
            self._state.name = self.name
            input_ids = _tensor_list(graph, _lib.graph_inputs)
            output_ids = _tensor_list(graph, _lib.graph_outputs)
            if donate is not None:
                _set_donations(graph, input_ids, donate)
            self.inputs = [_tensor_info(graph, t, bool(_lib.graph_tensor_donated(graph, t)))
                           for t in input_ids]
            self.outputs = [_tensor_info(graph, t, False) for t in output_ids]
            options = _lib.ExecOptions()
            _lib.exec_options_init(_lib.byref(options))
            options.mode = _lib.EXEC_MODES[mode]
            options.profile = bool(profile)
            if plan_time_limit is not None:
                options.plan_time_limit_s = float(plan_time_limit)
            if fusion is not None:
                options.fusion = 1 if fusion else -1
            executor = _lib.exec_p()
            check(_lib.exec_create(pointer, graph, _lib.byref(options), _lib.byref(executor)),
                  pointer)
            self._state.exec = executor
        except BaseException:
            self.close()
            raise
        self.mode = self.stats()["mode"]  # what "context" resolved to
        self.profile = bool(profile)
        self._input_index = {info.name: i for i, info in enumerate(self.inputs)}
        # What each run needs, computed once: per input (name, dtype, shape, bytes, donated,
        # allocation label, the name in messages), per output (name, dtype, shape, bytes), and
        # the C array of buffers handed to clrun_exec_run.
        self._input_plan = [(i.name, i.dtype, i.shape, _bytes(i), i.donated, i.name.encode(),
                             "input '%s'" % i.name) for i in self.inputs]
        self._output_plan = [(i.name, i.dtype, i.shape, _bytes(i)) for i in self.outputs]
        self._donates = any(i.donated for i in self.inputs)
        self._buffers = (_lib.Buffer * max(1, len(self.inputs)))()

    # -- lifetime --

    def close(self):
        """Frees the executor (its weights and outputs on the device) and the graph."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def context(self):
        return self._context

    def _exec(self):
        if self._state.exec is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed" % self.name)
        return self._state.exec

    # -- running --

    def __call__(self, inputs=None, **named):
        return self.run(inputs, **named)

    def run(self, inputs=None, **named):
        """Runs the model once and returns its outputs, a dict of numpy arrays by name.

        `inputs` (a dict by input name) and keyword arguments give every input, as numpy arrays
        (anything np.asarray takes; converted within a kind: float64 to float32) or as
        :class:`DeviceArray` values of exactly the input's dtype and shape. A device array
        given for a donated input is consumed: using it again raises
        :class:`clrun.DonatedError`.
        """
        given = dict(inputs) if inputs else {}
        given.update(named)
        executor = self._exec()
        pointer = self._context._pointer()
        if given.keys() != self._input_index.keys():
            self._names_error(given)
        buffers = self._buffers
        temporary = []  # indices of the inputs uploaded for this run
        devices = []    # (index, array state) of the device arrays passed in place
        try:
            for i, (name, dtype, shape, nbytes, donated, label, what) in enumerate(self._input_plan):
                value = given[name]
                if isinstance(value, DeviceArray):
                    buffers[i] = self._device_input(value, name, dtype, shape)
                    devices.append((i, value._state))
                else:
                    host = as_host_array(value, dtype, what)
                    if host.shape != shape:
                        raise InvalidArgumentError(INVALID_ARGUMENT, "%s has shape %s, %s given"
                                                   % (what, shape, host.shape))
                    buffer = buffers[i]
                    check(_lib.alloc_ex(pointer, nbytes, 0, label, _lib.byref(buffer)), pointer)
                    temporary.append(i)
                    check(_lib.buffer_write(pointer, _lib.byref(buffer), host.ctypes.data),
                          pointer)
            status = _lib.exec_run(executor, buffers, len(self._input_plan))
            if status != 0:
                self._run_failed(status, pointer, devices, temporary)
            if self._donates:
                self._consume_donated(devices, temporary)
            return self._read_outputs(executor, pointer)
        finally:
            for i in temporary:
                _lib.free(pointer, _lib.byref(buffers[i]))

    def _names_error(self, given):
        expected = ", ".join(self._input_index)
        for name in given:
            if name not in self._input_index:
                raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' has no input '%s' (its "
                                           "inputs: %s)" % (self.name, name, expected))
        missing = [n for n in self._input_index if n not in given]
        raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s': missing input%s %s (its inputs: "
                                   "%s)" % (self.name, "s" if len(missing) > 1 else "",
                                            ", ".join("'%s'" % n for n in missing), expected))

    def _device_input(self, array, name, dtype, shape):
        state = array._state
        if state.context is not self._state.context:
            raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s': the device array belongs to "
                                       "another context" % name)
        # An array a run consumed goes to the library all the same: it refuses it with its own
        # donation error (see _run_failed).
        state.require_live()
        if array.dtype != dtype or array.shape != shape:
            raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s' is %s%s, the device array is "
                                       "%s%s" % (name, dtype, list(shape), array.dtype,
                                                 list(array.shape)))
        return state.buffer

    def _run_failed(self, status, pointer, devices, temporary):
        message = _lib.text(_lib.last_error(pointer))
        for _, state in devices:
            if state.consumed_by is not None:  # passed again after a run consumed it
                raise state.donated_error(status, message)
        # The run refused its inputs before taking any (a donated buffer again, a wrong one):
        # nothing was consumed. Any later failure consumed the donated inputs.
        if status not in (INVALID_ARGUMENT, DONATED):
            self._consume_donated(devices, temporary)
        raise error(status, message)

    def _consume_donated(self, devices, temporary):
        plan = self._input_plan
        for i, state in devices:
            if plan[i][4] and state.consumed_by is None:
                state.consume(self._state, plan[i][0])
        # An uploaded donated input now belongs to the executor: not ours to free.
        temporary[:] = [i for i in temporary if not plan[i][4]]

    def _read_outputs(self, executor, pointer):
        outputs = {}
        for i, (name, dtype, shape, nbytes) in enumerate(self._output_plan):
            out = np.empty(shape, dtype)
            check(_lib.exec_read_output(executor, i, out.ctypes.data, nbytes), pointer)
            outputs[name] = out
        return outputs

    def example_inputs(self, seed=1):
        """The inputs ``clrun run --seed SEED`` feeds this model, as a dict of numpy arrays
        (clrun_graph_example_input): uniform in [-1, 1) for floats, integers in [0, 16), bools
        in [0, 2), identical on every machine, so a run here reproduces a CLI run bit for bit."""
        out = {}
        for i, (name, dtype, shape, nbytes) in enumerate(p[:4] for p in self._input_plan):
            array = np.empty(shape, dtype)
            check(_lib.graph_example_input(self._state.graph, i, int(seed), array.ctypes.data,
                                           nbytes))
            out[name] = array
        return out

    # -- reports --

    def stats(self):
        """The executor's accounting of its last run (clrun_exec_stats) as a dict: mode,
        allocator, steps, peak_bytes, reserved_bytes, lower_bound_bytes, naive_bytes,
        constant_bytes, driver_allocs, donations, unused_donations (with their names in
        unused_donated), wall_ms, views, graph_nodes, kernels, fused_groups, fused_nodes, and the ratios peak_over_lower_bound and saving_over_naive
        (1 - peak / naive)."""
        executor = self._exec()
        stats = _lib.ExecStats()
        check(_lib.exec_stats_get(executor, _lib.byref(stats)), self._context._pointer())
        out = {name: getattr(stats, name) for name in _lib.fields(_lib.ExecStats)}
        out["mode"] = _lib.text(stats.mode)
        out["allocator"] = _lib.text(stats.allocator)
        names = _lib.POINTER(_lib.c_char_p)()
        n = _lib.exec_unused_donations(executor, _lib.byref(names))
        out["unused_donated"] = [_lib.text(names[i]) for i in range(n)]
        peak, bound, naive = stats.peak_bytes, stats.lower_bound_bytes, stats.naive_bytes
        out["peak_over_lower_bound"] = peak / bound if bound else None
        out["saving_over_naive"] = 1 - peak / naive if naive else None
        return out

    def plan(self):
        """The memory layout: one dict per buffer (constants excluded) in schedule order, with
        tensor (the first tensor that owns it; others may take it over in place), bytes, first
        and last (the steps that write it and last read it; -1 for inputs, `steps` for outputs),
        is_input, is_output, is_scratch (a node's scratch, alive at its step alone; tensor names
        its node's first output), and offset: its byte offset in the arena in planned mode, None
        in the other modes (whose blocks come from the pool at run time) and for inputs."""
        executor = self._exec()
        pointer = self._context._pointer()
        count = _lib.c_int32()
        check(_lib.exec_layout(executor, None, 0, _lib.byref(count)), pointer)
        entries = (_lib.ExecBufferInfo * max(1, count.value))()
        check(_lib.exec_layout(executor, entries, count.value, _lib.byref(count)), pointer)
        return [{"tensor": _lib.text(e.tensor), "bytes": e.bytes, "first": e.first_step,
                 "last": e.last_step, "is_input": e.is_input, "is_output": e.is_output,
                 "is_scratch": e.is_scratch,
                 "offset": None if e.offset == _lib.NO_OFFSET else e.offset}
                for e in entries[:count.value]]

    def profile_spans(self):
        """The nodes of the last run (load with profile=True): a list of dicts with op, name
        (its first output), start_ns, end_ns (device clock, from the run's first node),
        bytes_in_use (bytes the run holds while the node runs; the run's peak is the largest)
        and bytes_after (the same once the buffers the node read last are given back)."""
        spans = _lib.POINTER(_lib.ExecSpan)()
        n = _lib.exec_profile(self._exec(), _lib.byref(spans))
        return [{"op": _lib.text(s.op), "name": _lib.text(s.name), "start_ns": s.start_ns,
                 "end_ns": s.end_ns, "bytes_in_use": s.bytes_in_use, "bytes_after": s.bytes_after}
                for s in (spans[i] for i in range(n))]

    def trace(self, path):
        """Writes the last run as a Chrome/Perfetto trace (open it in ui.perfetto.dev), as
        ``clrun run --trace`` writes it: the process and queue named, a span per kernel, and a
        counter of the bytes the run holds, whose maximum is the run's peak. Needs a model
        loaded with profile=True and a run."""
        if not self.profile:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' was loaded without "
                                       "profile=True: there is nothing to trace" % self.name)
        spans = self.profile_spans()
        if not spans:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' has not run yet" % self.name)

        def named(what, name):
            return {"name": what, "ph": "M", "pid": 1, "tid": 1, "args": {"name": name}}

        def counter(ns, held):
            return {"name": "bytes in use", "ph": "C", "ts": ns / 1e3, "pid": 1,
                    "args": {"bytes": held}}

        events = [named("process_name", "clrun %s" % self.name),
                  named("thread_name", "queue of %s" % self._context.device.name)]
        for s in spans:
            events.append({"name": s["op"], "cat": "kernel", "ph": "X", "ts": s["start_ns"] / 1e3,
                           "dur": (s["end_ns"] - s["start_ns"]) / 1e3, "pid": 1, "tid": 1,
                           "args": {"output": s["name"], "bytes_in_use": s["bytes_in_use"]}})
            events.append(counter(s["start_ns"], s["bytes_in_use"]))
            events.append(counter(s["end_ns"], s["bytes_after"]))
        try:
            with open(path, "w") as out:
                json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, out)
        except OSError as e:
            raise error(-14, "cannot write trace '%s': %s" % (path, e.strerror)) from e

    def __repr__(self):
        if self._state.exec is None:
            return "Model(%r, closed)" % self.name
        return "Model(%r, mode=%r, inputs=%s, outputs=%s)" % (
            self.name, self.mode, [i.name for i in self.inputs], [o.name for o in self.outputs])


def _bytes(info):
    return int(np.prod(info.shape, dtype=np.int64)) * info.dtype.itemsize


def _mode(mode):
    if mode is None:
        return "context"  # the library resolves it from the context's allocator
    if mode not in _lib.EXEC_MODES or mode == "context":
        raise InvalidArgumentError(INVALID_ARGUMENT, "mode is 'pooled', 'planned' or 'naive', "
                                   "not %r" % (mode,))
    return mode


def _set_donations(graph, input_ids, donate):
    if isinstance(donate, str):
        donate = [donate]
    names = {_lib.text(_lib.graph_tensor_name(graph, t)): t for t in input_ids}
    wanted = set(donate)
    for name in wanted:
        if name not in names:
            raise InvalidArgumentError(INVALID_ARGUMENT, "donate: the model has no input '%s' "
                                       "(its inputs: %s)" % (name, ", ".join(names)))
    for name, t in names.items():
        check(_lib.graph_set_donated(graph, t, name in wanted))
