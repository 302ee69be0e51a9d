"""Models: a graph prepared for a context (one executor per input shape), run on numpy or
device arrays, from any thread."""

import json
import os
import threading
import warnings
import weakref
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from . import _lib, _onnx
from ._context import DTYPE_CODES, DTYPES, DeviceArray, _size, as_host_array
from .errors import (InvalidArgumentError, UnsupportedError, UnusedDonationWarning, check,
                     error, type_error, INVALID_ARGUMENT, DONATED, UNSUPPORTED, IO)

TensorInfo = namedtuple("TensorInfo", "name dtype shape donated")
TensorInfo.__doc__ = """A model input or output: its name, numpy dtype, shape (a tuple) and,
for inputs, whether each run consumes its device memory (donated; always False for outputs).
In a model loaded with symbolic dimensions left unbound, those are strings ("batch") and
unknown ones None, as the model declares them."""


class _Executor:
    """One C graph and its executor, for one binding of the model's dimensions. Runs of it are
    serialised by its lock (the C executor serialises its calls, but a run and the reading of
    its outputs are separate calls); uploads happen outside the lock."""

    def __init__(self, graph, executor, inputs, outputs):
        self.graph = graph
        self.exec = executor
        self.lock = threading.Lock()
        self.inputs = inputs
        self.outputs = outputs
        # What each run needs, computed once: per input (name, dtype, shape, bytes, donated,
        # allocation label, the name in messages), per output (name, dtype, shape, bytes).
        self.input_plan = [(i.name, i.dtype, i.shape, _bytes(i), i.donated, i.name.encode(),
                            "input '%s'" % i.name) for i in inputs]
        self.output_plan = [(i.name, i.dtype, i.shape, _bytes(i)) for i in outputs]
        self.ran = False

    def close(self):
        with self.lock:
            if self.exec:
                _lib.exec_destroy(self.exec)
                self.exec = None
            if self.graph:
                _lib.graph_destroy(self.graph)
                self.graph = None


class _ModelState:
    """The executors of a model, freed by close() or with the context."""

    def __init__(self, context, name):
        self.context = context
        self.name = name
        self.executors = {}  # binding of the unbound dimensions -> _Executor
        self.lock = threading.Lock()
        self.last = None     # the executor of the last run (or the only one)
        self.closed = False

    @property
    def exec(self):
        """The C executor of the last run, or of the only binding (bench/bench_python.py)."""
        return self.last.exec if self.last is not None else None

    def close(self):
        with self.lock:
            self.closed = True
            executors = list(self.executors.values())
            self.executors.clear()
            self.last = None
        for executor in executors:
            executor.close()
        self.context.forget(self)


def _is_bytes(source):
    return isinstance(source, (bytes, bytearray, memoryview))


class _GraphSource:
    """A C graph built in memory (clrun_graph_gradient's), as the source of a Model: the model's
    one executor takes it over (_load_graph); until then, close() destroys it. Its shapes are
    fixed, as a .graph file's are."""

    def __init__(self, graph, name):
        self.graph = graph
        self.name = name

    def take(self):
        graph, self.graph = self.graph, None
        return graph

    def close(self):
        if self.graph:
            _lib.graph_destroy(self.take())


def _load_graph(source, dims, shapes, what, constants=None):
    """Parses a .graph file or imports an ONNX model (a path, or bytes) with its dimensions
    bound by `dims` ({name: int}) and `shapes` ({input: tuple}) and inputs fixed by `constants`
    ({input: numpy array}); returns the C graph. A _GraphSource gives up its own graph."""
    if isinstance(source, _GraphSource):
        if dims or shapes or constants:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s: dims=, shapes= and constants= "
                                       "apply to ONNX models; this graph has fixed shapes" % what)
        if not source.graph:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s: the graph is already taken" % what)
        return source.take()
    graph = _lib.graph_p()
    if _is_bytes(source) or os.fspath(source).endswith(".onnx"):
        loader = _lib.graph_load_onnx_memory if _is_bytes(source) else _lib.graph_load_onnx
        if loader is None:
            raise UnsupportedError(UNSUPPORTED, "%s: this libclrun has no ONNX import "
                                   "(clrun_graph_load_onnx); load a .graph file" % what)
        options = _lib.OnnxOptions()
        _lib.onnx_options_init(_lib.byref(options))
        keep = []  # what the options point at, alive through the call
        if dims:
            array = (_lib.OnnxDim * len(dims))()
            for entry, (name, value) in zip(array, dims.items()):
                entry.name = name.encode()
                entry.value = value
            options.dims, options.dim_count = array, len(dims)
            keep.append(array)
        if shapes:
            array = (_lib.OnnxShape * len(shapes))()
            for entry, (name, shape) in zip(array, shapes.items()):
                entry.input = name.encode()
                entry.rank = len(shape)
                for d, value in enumerate(shape):
                    entry.dims[d] = value
            options.shapes, options.shape_count = array, len(shapes)
            keep.append(array)
        if constants:
            array = (_lib.OnnxConstant * len(constants))()
            for entry, (name, value) in zip(array, constants.items()):
                entry.input = name.encode()
                entry.type.dtype = DTYPE_CODES[value.dtype]
                entry.type.rank = value.ndim
                for d, size in enumerate(value.shape):
                    entry.type.shape[d] = size
                entry.data = value.ctypes.data
            options.constants, options.constant_count = array, len(constants)
            keep.append(array)
        if _is_bytes(source):
            data = bytes(source)
            status = loader(data, len(data), b"<bytes>", _lib.byref(options), _lib.byref(graph))
        else:
            status = loader(os.fsencode(source), _lib.byref(options), _lib.byref(graph))
        check(status)
        return graph
    if dims or shapes or constants:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s: dims=, shapes= and constants= apply to "
                                   "ONNX models; a .graph file has fixed shapes and inputs" % what)
    message = _lib.ctypes.create_string_buffer(2048)
    status = _lib.graph_load(os.fsencode(source), _lib.byref(graph), message, len(message))
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


def _check_dims(dims):
    if dims is None:
        return {}
    if not isinstance(dims, Mapping):
        raise type_error("dims is a dict of symbolic dimension values, {'batch': 8}, not %r"
                         % (dims,))
    out = {}
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgumentError(INVALID_ARGUMENT, "dims: dimension '%s' is bound to %r "
                                       "(an int >= 1)" % (name, value))
        out[str(name)] = int(value)
    return out


def _check_constants(constants):
    """{input: value} as {input: C-contiguous numpy array}. A Python number goes as float64,
    which the library converts to the input's type when it does so exactly."""
    if constants is None:
        return {}
    if not isinstance(constants, Mapping):
        raise type_error("constants is a dict of input values, {'sr': 16000}, not %r" % (constants,))
    out = {}
    for name, value in constants.items():
        if isinstance(value, (bool, np.bool_)):
            array = np.asarray(value, np.bool_)
        elif isinstance(value, (int, float)):
            array = np.asarray(value, np.float64)
        else:
            array = np.ascontiguousarray(np.asarray(value))
        if array.dtype not in DTYPE_CODES:
            raise type_error("constants: the value given for input '%s' is of dtype %s; clrun "
                             "tensors are %s" % (name, array.dtype,
                                                 ", ".join(str(d) for d in DTYPES.values())))
        if array.ndim > _lib.MAX_DIMS:
            raise InvalidArgumentError(INVALID_ARGUMENT, "constants: the value given for input "
                                       "'%s' has %d dims (at most %d)" % (name, array.ndim,
                                                                          _lib.MAX_DIMS))
        out[str(name)] = array
    return out


def _check_shapes(shapes):
    if shapes is None:
        return {}
    if not isinstance(shapes, Mapping):
        raise type_error("shapes is a dict of input shapes, {'x': (2, 3)}, not %r" % (shapes,))
    out = {}
    for name, shape in shapes.items():
        shape = tuple(shape)
        if len(shape) > _lib.MAX_DIMS or any(isinstance(d, bool) or not isinstance(
                d, (int, np.integer)) or d < 1 for d in shape):
            raise InvalidArgumentError(INVALID_ARGUMENT, "shapes: the shape given for input '%s' "
                                       "is %r (at most %d ints >= 1)"
                                       % (name, shape, _lib.MAX_DIMS))
        out[str(name)] = tuple(int(d) for d in shape)
    return out


def _declared_dtype(elem):
    name = _onnx.ELEM_TYPES.get(elem)
    return np.dtype(name) if name else None


class Model:
    """A model loaded by :meth:`clrun.Context.load`, ready to run on its context.

    Attributes:
        name: the graph's name.
        mode: "pooled", "planned" or "naive" (None until the first run of a model whose
            dimensions are taken from its inputs, when its mode comes from the context).
        inputs, outputs: lists of :class:`TensorInfo` (name, dtype, shape, donated).

    Call it with the inputs by name, ``model(x=array)``, or ``model.run({"x": array})``: numpy
    arrays are uploaded for the run, :class:`DeviceArray` values are used in place; the result
    is a dict of numpy arrays by output name. An ONNX model with symbolic dimensions left
    unbound by ``dims=`` takes them from the arrays it is fed: one executor per distinct
    binding, prepared on first use and kept. A call may come from any thread. Free it with
    :meth:`close` (or garbage collection, or with its context).
    """

    def __init__(self, context, source, dims=None, shapes=None, fusion=None, mode=None,
                 donate=None, profile=False, plan_time_limit=None, strict_donation=False,
                 fold=None, constants=None, weights=None, memory_budget=None):
        self._context = context
        self._memory_budget = (None if memory_budget is None
                               else _size(memory_budget, "memory_budget"))
        if weights not in (None, "f16", "bf16", "int8"):
            raise InvalidArgumentError(INVALID_ARGUMENT, "weights is \"f16\", \"bf16\", \"int8\" or None, "
                                       "not %r" % (weights,))
        if weights is not None and _lib.graph_narrow_weights is None:
            raise UnsupportedError(UNSUPPORTED, "this libclrun cannot narrow weights "
                                   "(clrun_graph_narrow_weights)")
        self._weights = weights
        self.weights_report = None
        context._pointer()
        self._requested_mode = _mode(mode)
        if fusion is not None and not isinstance(fusion, bool):
            raise InvalidArgumentError(INVALID_ARGUMENT, "fusion is True, False or None")
        if fold is not None and not isinstance(fold, bool):
            raise InvalidArgumentError(INVALID_ARGUMENT, "fold is True, False or None")
        self._fold = fold
        if _is_bytes(source):
            self._source, what = bytes(source), "<bytes>"
        elif isinstance(source, _GraphSource):  # Context.gradient's graph, adopted
            self._source, what = source, source.name
        elif isinstance(source, (str, bytes, os.PathLike)):
            self._source = what = os.fspath(source)
        else:
            raise type_error("load takes a path or the bytes of an ONNX model, not %s"
                             % type(source).__name__)
        self._dims = _check_dims(dims)
        self._shapes = _check_shapes(shapes)
        self._constants = _check_constants(constants)
        self._donate = [donate] if isinstance(donate, str) else donate
        self._fusion, self._profile_flag = fusion, bool(profile)
        self._plan_time_limit = plan_time_limit
        self._strict_donation = bool(strict_donation)
        self.profile = bool(profile)
        self._state = _ModelState(context._state, what)
        context._state.adopt(self._state)
        self._finalizer = weakref.finalize(self, _ModelState.close, self._state)
        try:
            self._free = self._unbound_inputs(source)
            if self._free is None:  # every dimension is bound: prepare the model now
                executor = self._prepare({}, stacklevel=4)
                self._state.executors[()] = executor
                self._state.last = executor
                self.inputs, self.outputs = executor.inputs, executor.outputs
        except BaseException:
            self.close()
            raise
        self._input_index = {info.name: i for i, info in enumerate(self.inputs)}
        self.name = self._state.name

    def _unbound_inputs(self, source):
        """None when the model's dimensions are all bound (a .graph file, an ONNX model without
        symbolic dimensions, or with dims= and shapes= binding them); else the inputs whose
        dimensions a run takes from its arrays, {name: declared dims with dims= applied}, and
        the model's inputs and outputs as declared."""
        if isinstance(source, _GraphSource) or (not _is_bytes(source)
                                                 and not self._source.endswith(".onnx")):
            return None
        try:
            inputs, outputs = _onnx.signature(self._source)
        except Exception:  # not readable here: the library's import says what is wrong
            return None
        params = [d for _, _, dims in inputs for d in dims or () if isinstance(d, str)]
        for name in self._dims:
            if name not in params:
                raise InvalidArgumentError(INVALID_ARGUMENT, "dims: no input of the model has a "
                                           "dimension '%s' (its symbolic dimensions: %s)"
                                           % (name, ", ".join(sorted(set(params))) or "none"))
        for name in self._shapes:
            if name not in [i[0] for i in inputs]:
                raise InvalidArgumentError(INVALID_ARGUMENT, "shapes: the model has no input "
                                           "'%s' (its inputs: %s)"
                                           % (name, ", ".join(i[0] for i in inputs)))
        free = {}
        for name, _, dims in inputs:
            if name in self._shapes:
                continue
            if dims is None:  # no shape in the model: the whole shape comes from the array
                free[name] = None
                continue
            dims = tuple(self._dims.get(d, d) if isinstance(d, str) else d for d in dims)
            if not all(isinstance(d, int) for d in dims):
                free[name] = dims
        if not free:
            return None
        donated = set(self._donate or ())
        self.inputs = [TensorInfo(name, _declared_dtype(elem),
                                  self._shapes.get(name, free.get(name, dims)), name in donated)
                       for name, elem, dims in inputs]
        self.outputs = [TensorInfo(name, _declared_dtype(elem), dims, False)
                        for name, elem, dims in outputs]
        self._state.name = os.path.basename(self._source) if isinstance(self._source, str) \
            else "<bytes>"
        return free

    def _prepare(self, shapes, stacklevel):
        """A new executor for the model with `shapes` bound besides dims= and shapes=."""
        pointer = self._context._pointer()
        graph = _lib.graph_p()
        executor = None
        try:
            bound = dict(self._shapes)
            bound.update(shapes)
            graph = _load_graph(self._source, self._dims, bound,
                                self._state.name if shapes else self._state.name, self._constants)
            if not self._state.executors:
                name = _lib.text(_lib.graph_name(graph))
                if name or isinstance(self._source, str):
                    self._state.name = name or os.path.basename(self._source)
            input_ids = _tensor_list(graph, _lib.graph_inputs)
            output_ids = _tensor_list(graph, _lib.graph_outputs)
            if self._donate is not None:
                _set_donations(graph, input_ids, self._donate)
            if self._weights is not None:
                self.weights_report = _narrow_weights(graph, self._weights)
            inputs = [_tensor_info(graph, t, bool(_lib.graph_tensor_donated(graph, t)))
                      for t in input_ids]
            outputs = [_tensor_info(graph, t, False) for t in output_ids]
            options = _lib.ExecOptions()
            _lib.exec_options_init(_lib.byref(options))
            options.mode = _lib.EXEC_MODES[self._requested_mode]
            options.profile = self._profile_flag
            if self._plan_time_limit is not None:
                options.plan_time_limit_s = float(self._plan_time_limit)
            if self._fusion is not None:
                options.fusion = 1 if self._fusion else -1
            if self._fold is not None:
                options.fold = 1 if self._fold else -1
            if self._memory_budget is not None:
                options.memory_budget = self._memory_budget
            executor = _lib.exec_p()
            check(_lib.exec_create(pointer, graph, _lib.byref(options), _lib.byref(executor)),
                  pointer)
            prepared = _Executor(graph, executor, inputs, outputs)
            graph = executor = None  # owned by `prepared`
        except BaseException:
            if executor:
                _lib.exec_destroy(executor)
            if graph:
                _lib.graph_destroy(graph)
            raise
        try:
            names = _lib.POINTER(_lib.c_char_p)()
            n = _lib.exec_unused_donations(prepared.exec, _lib.byref(names))
            if n:
                unused = ", ".join("'%s'" % _lib.text(names[i]) for i in range(n))
                message = ("model '%s' donates input%s %s, which no output can take: %s memory "
                           "is freed after its last use, never reused in place"
                           % (self._state.name, "s" if n > 1 else "", unused,
                              "their" if n > 1 else "its"))
                if self._strict_donation:
                    raise InvalidArgumentError(INVALID_ARGUMENT, message + " (strict_donation)")
                warnings.warn(message, UnusedDonationWarning, stacklevel=stacklevel)
        except BaseException:
            prepared.close()
            raise
        return prepared

    # -- lifetime --

    def close(self):
        """Frees the executors (their weights and outputs on the device) and the graphs."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def context(self):
        return self._context

    @property
    def mode(self):
        executor = self._state.last
        if executor is None:
            return None if self._requested_mode == "context" else self._requested_mode
        return self._stats(executor)["mode"]

    def _require_open(self):
        if self._state.closed:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed" % self.name)

    def _current(self):
        """The executor the reports describe: the last run's, or the only one."""
        self._require_open()
        executor = self._state.last
        if executor is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' takes dimension%s %s from "
                                       "its inputs and has not run yet (run it, or load it with "
                                       "dims=)" % (self.name, "s" if len(self._free_names()) > 1
                                                   else "", ", ".join(self._free_names())))
        return executor

    def _free_names(self):
        names = []
        for dims in (self._free or {}).values():
            for d in dims or (None,):
                label = "'%s'" % d if isinstance(d, str) else "an unnamed one"
                if not isinstance(d, int) and label not in names:
                    names.append(label)
        return names

    # -- running --

    def __call__(self, inputs=None, **named):
        return self.run(inputs, **named)

    def run(self, inputs=None, **named):
        """Runs the model once and returns its outputs, a dict of numpy arrays by name.

        `inputs` (a dict by input name) and keyword arguments give every input, as numpy arrays
        of the input's kind (float64 converted to float32; an int array for a float input
        raises TypeError), Python numbers or lists, or :class:`DeviceArray` values of exactly
        the input's dtype and shape. A device array given for a donated input is consumed:
        using it again raises :class:`clrun.DonatedError`. Safe from any thread.
        """
        if inputs is not None and not isinstance(inputs, Mapping):
            raise type_error("model '%s' takes its inputs by name: model(%s) or model.run({%s}), "
                             "not a positional %s" % (
                                 self.name, ", ".join("%s=..." % n for n in self._input_index),
                                 ", ".join("'%s': ..." % n for n in self._input_index),
                                 type(inputs).__name__))
        given = dict(inputs) if inputs is not None else {}
        given.update(named)
        self._require_open()
        pointer = self._context._pointer()
        if given.keys() != self._input_index.keys():
            self._names_error(given)
        executor = self._executor_for(given)
        return self._run(executor, given, pointer)

    def _executor_for(self, given):
        """The executor for the dimensions the given arrays bind (made on first use)."""
        if self._free is None:
            return self._state.executors[()]
        bound, where, shapes = {}, {}, {}
        for name, declared in self._free.items():
            shape = tuple(int(d) for d in np.shape(given[name]))
            if declared is None:
                shapes[name] = shape
                continue
            if len(shape) != len(declared):
                raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s' has %d dimensions %s, "
                                           "%s given" % (name, len(declared), _show(declared),
                                                         shape))
            for d, (want, got) in enumerate(zip(declared, shape)):
                if isinstance(want, int) and want != got:
                    raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s' has shape %s, %s "
                                               "given" % (name, _show(declared), shape))
                if isinstance(want, str):
                    if want in bound and bound[want] != got:
                        raise InvalidArgumentError(
                            INVALID_ARGUMENT, "dimension '%s' is %d in input '%s' and %d in "
                            "input '%s'" % (want, bound[want], where[want], got, name))
                    bound[want], where[want] = got, name
            shapes[name] = shape
        key = tuple(sorted(shapes.items()))
        with self._state.lock:
            self._require_open()
            executor = self._state.executors.get(key)
            if executor is None:
                executor = self._prepare(shapes, stacklevel=5)
                self._state.executors[key] = executor
            return executor

    def _run(self, executor, given, pointer):
        plan = executor.input_plan
        buffers = (_lib.Buffer * max(1, len(plan)))()  # this call's own
        temporary = []  # indices of the inputs uploaded for this run, registered before upload
        devices = []    # (index, array state, consumed before this run) passed in place
        try:
            for i, (name, dtype, shape, nbytes, donated, label, what) in enumerate(plan):
                value = given[name]
                if isinstance(value, DeviceArray):
                    buffers[i] = self._device_input(value, name, dtype, shape)
                    devices.append((i, value._state, value._state.consumed_by is not None))
                    continue
                host = as_host_array(value, dtype, what)
                if host.shape != shape:
                    raise InvalidArgumentError(INVALID_ARGUMENT, "%s has shape %s, %s given"
                                               % (what, shape, host.shape))
                if nbytes == 0:
                    continue  # an empty input (a dimension 0): no buffer, the zero one
                temporary.append(i)
                check(_lib.alloc_ex(pointer, nbytes, 0, label, _lib.byref(buffers[i])), pointer)
                check(_lib.buffer_write(pointer, _lib.byref(buffers[i]), host.ctypes.data),
                      pointer)
            # What the run may take is given up before it starts: a KeyboardInterrupt just after
            # the run then leaks at worst (until the context closes), never frees the executor's
            # memory. A refused run gives it back.
            taken = [(i, state) for i, state, before in devices if plan[i][4] and not before]
            uploads = [i for i in temporary if plan[i][4]]
            with executor.lock:
                if executor.exec is None:
                    raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed"
                                               % self.name)
                for i, state in taken:
                    state.consume(self._state, plan[i][0])
                temporary[:] = [i for i in temporary if not plan[i][4]]
                status = _lib.exec_run(executor.exec, buffers, len(plan))
                if status != 0:
                    message = _lib.text(_lib.last_error(pointer))
                    if status in (INVALID_ARGUMENT, DONATED):  # refused before taking any
                        for _, state in taken:
                            state.unconsume()
                        temporary.extend(uploads)
                    for _, state, before in devices:
                        if before:  # passed again after a run consumed it
                            raise state.donated_error(status, message)
                    raise error(status, message)
                self._state.last = executor
                return self._read_outputs(executor, pointer)
        finally:
            for i in temporary:
                if buffers[i].mem:
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
        # donation error (see _run).
        state.require_live()
        if array.dtype != dtype or array.shape != shape:
            raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s' is %s%s, the device array is "
                                       "%s%s" % (name, dtype, list(shape), array.dtype,
                                                 list(array.shape)))
        return state.buffer

    def _read_outputs(self, executor, pointer):
        outputs = {}
        for i, (name, dtype, shape, nbytes) in enumerate(executor.output_plan):
            out = np.empty(shape, dtype)
            check(_lib.exec_read_output(executor.exec, i, out.ctypes.data, nbytes), pointer)
            outputs[name] = out
        return outputs

    def example_inputs(self, seed=1):
        """The inputs ``clrun run --seed SEED`` feeds this model, as a dict of numpy arrays
        (clrun_graph_example_input): uniform in [-1, 1) for floats, integers in [0, 16), bools
        in [0, 2), identical on every machine, so a run here reproduces a CLI run bit for bit.
        A model that takes dimensions from its inputs gives those of its last run."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise type_error("seed is an int, as clrun run --seed takes it, not %r" % (seed,))
        if not 0 <= int(seed) < 1 << 64:
            raise InvalidArgumentError(INVALID_ARGUMENT, "seed is %d: it is 0 to 2^64 - 1, as "
                                       "clrun run --seed takes it" % seed)
        executor = self._current()
        out = {}
        for i, (name, dtype, shape, nbytes) in enumerate(p[:4] for p in executor.input_plan):
            array = np.empty(shape, dtype)
            check(_lib.graph_example_input(executor.graph, i, int(seed), array.ctypes.data,
                                           nbytes))
            out[name] = array
        return out

    def save_graph(self, path):
        """Writes the model's graph to `path` in the .graph text format (clrun_graph_write,
        docs/graph-format.md), as ``clrun grad --out`` writes one: a model made by
        :meth:`clrun.Context.gradient`, or any loaded model (an ONNX model as imported).
        ``clrun run PATH`` and :meth:`clrun.Context.load` read it back. Tensors are written
        under their identifiers: a model's own names ("dense/Relu:0") do not survive the text
        format. A model that takes dimensions from its inputs writes the graph of its last run.
        Raises clrun.InputOutputError when the file cannot be written."""
        executor = self._current()
        with executor.lock:
            if executor.graph is None:
                raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed" % self.name)
            stream = _lib.fopen(os.fsencode(path), b"w")
            if not stream:
                reason = os.strerror(_lib.ctypes.get_errno())
                raise error(IO, "cannot write graph '%s': %s" % (os.fspath(path), reason))
            status = _lib.graph_write(executor.graph, stream)
            if _lib.fclose(stream) != 0 and status == 0:
                status = IO
        if status:
            raise error(IO, "cannot write graph '%s'" % os.fspath(path))

    # -- reports --

    def _stats(self, executor):
        with executor.lock:
            if executor.exec is None:
                raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed" % self.name)
            stats = _lib.ExecStats()
            check(_lib.exec_stats_get(executor.exec, _lib.byref(stats)), self._context._pointer())
            out = {name: getattr(stats, name) for name in _lib.fields(_lib.ExecStats)}
            out["mode"] = _lib.text(stats.mode)
            out["allocator"] = _lib.text(stats.allocator)
            names = _lib.POINTER(_lib.c_char_p)()
            n = _lib.exec_unused_donations(executor.exec, _lib.byref(names))
            out["unused_donated"] = [_lib.text(names[i]) for i in range(n)]
            names = _lib.POINTER(_lib.c_char_p)()
            n = _lib.exec_offloaded(executor.exec, _lib.byref(names))
            out["offloaded"] = [_lib.text(names[i]) for i in range(n)]
        peak, bound, naive = stats.peak_bytes, stats.lower_bound_bytes, stats.naive_bytes
        out["peak_over_lower_bound"] = peak / bound if bound else None
        out["saving_over_naive"] = 1 - peak / naive if naive else None
        return out

    def stats(self):
        """The executor's accounting of its last run (clrun_exec_stats) as a dict: mode,
        allocator, steps, peak_bytes, reserved_bytes, lower_bound_bytes, naive_bytes,
        constant_bytes, driver_allocs, donations (donated_in_place of them over donated inputs),
        unused_donations (with their names in unused_donated), wall_ms, views,
        assembled_concats (assembled_in_part of them only in part), graph_nodes, kernels,
        fused_groups, fused_nodes, folded_nodes, folded_batchnorms, and the ratios peak_over_lower_bound and saving_over_naive
        (1 - peak / naive). A model that takes dimensions from its inputs reports the executor
        of its last run."""
        return self._stats(self._current())

    def plan(self):
        """The memory layout: one dict per buffer (constants excluded) in schedule order, with
        tensor (the first tensor that owns it; others may take it over in place), bytes, first
        and last (the steps that write it and last read it; -1 for inputs, `steps` for outputs),
        is_input, is_output, is_scratch (a node's scratch, alive at its step alone; tensor names
        its node's first output), and offset: its byte offset in the arena in planned mode, None
        in the other modes (whose blocks come from the pool at run time) and for inputs."""
        executor = self._current()
        pointer = self._context._pointer()
        with executor.lock:
            count = _lib.c_int32()
            check(_lib.exec_layout(executor.exec, None, 0, _lib.byref(count)), pointer)
            entries = (_lib.ExecBufferInfo * max(1, count.value))()
            check(_lib.exec_layout(executor.exec, entries, count.value, _lib.byref(count)),
                  pointer)
            return [{"tensor": _lib.text(e.tensor), "bytes": e.bytes, "first": e.first_step,
                     "last": e.last_step, "is_input": e.is_input, "is_output": e.is_output,
                     "is_scratch": e.is_scratch,
                     "offset": None if e.offset == _lib.NO_OFFSET else e.offset}
                    for e in entries[:count.value]]

    def profile_spans(self):
        """The nodes of the last run (load with profile=True): a list of dicts with op, name
        (its first output), start_ns, end_ns (device clock, from the run's first node),
        bytes_in_use (bytes the run holds while the node runs; the run's peak is the largest)
        and bytes_after (the same once the buffers the node read last are given back). Raises
        clrun.InvalidArgumentError, as :meth:`trace` does, for a model loaded without
        profile=True or that has not run."""
        if not self.profile:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' was loaded without "
                                       "profile=True: there is nothing to trace" % self.name)
        executor = self._current()
        with executor.lock:
            spans = _lib.POINTER(_lib.ExecSpan)()
            n = _lib.exec_profile(executor.exec, _lib.byref(spans)) if executor.exec else 0
            out = [{"op": _lib.text(s.op), "name": _lib.text(s.name), "start_ns": s.start_ns,
                    "end_ns": s.end_ns, "bytes_in_use": s.bytes_in_use,
                    "bytes_after": s.bytes_after} for s in (spans[i] for i in range(n))]
        if not out:
            raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' has not run yet" % self.name)
        return out

    def trace(self, path):
        """Writes the last run as a Chrome/Perfetto trace (open it in ui.perfetto.dev), as
        ``clrun run --trace`` writes it: the process and queue named, a span per kernel, and a
        counter of the bytes the run holds, whose maximum is the run's peak. Needs a model
        loaded with profile=True and a run."""
        spans = self.profile_spans()

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
            raise error(IO, "cannot write trace '%s': %s" % (path, e.strerror)) from e

    def __repr__(self):
        if self._state.closed:
            return "Model(%r, closed)" % self.name
        return "Model(%r, mode=%r, inputs=%s, outputs=%s)" % (
            self.name, self.mode, [i.name for i in self.inputs], [o.name for o in self.outputs])


def _show(dims):
    """A declared shape as text: (batch, 4), with ? for an unknown dimension."""
    text = ", ".join("?" if d is None else str(d) for d in dims)
    return "(%s,)" % text if len(dims) == 1 else "(%s)" % text


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
    names = {_lib.text(_lib.graph_tensor_name(graph, t)): t for t in input_ids}
    wanted = set(donate)
    for name in wanted:
        if name not in names:
            raise InvalidArgumentError(INVALID_ARGUMENT, "donate: the model has no input '%s' "
                                       "(its inputs: %s)" % (name, ", ".join(names)))
    for name, t in names.items():
        check(_lib.graph_set_donated(graph, t, name in wanted))


def _narrow_weights(graph, weights):
    """clrun_graph_narrow_weights on a loaded graph (weights of 1024 elements or more, as
    ``clrun run --weights``): a dict of what it did."""
    report = _lib.WeightsReport()
    dtype = {"f16": 2, "bf16": 12}.get(weights, 6)  # CLRUN_F16, CLRUN_BF16, CLRUN_I8
    status = _lib.graph_narrow_weights(graph, dtype, 1024, _lib.byref(report))
    if status:
        raise error(status, _lib.text(_lib.graph_last_error(graph)))
    return {"weights": weights, "narrowed": report.narrowed, "kept_f32": report.kept,
            "bytes_before": report.bytes_before, "bytes_after": report.bytes_after}
