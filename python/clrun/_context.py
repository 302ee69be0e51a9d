"""Devices, contexts and device arrays."""

import os
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import _lib
from .errors import (InvalidArgumentError, DonatedError, check, error, type_error,
                     INVALID_ARGUMENT, DONATED)


def _numpy_of(name, size):
    """The numpy dtype of a clrun dtype name ("f32" float32, "i64" int64, "u8" uint8, "bool"
    bool)."""
    if name == "bool":
        dtype = np.dtype(np.bool_)
    elif name[:1] in ("f", "i", "u") and name[1:].isdigit():
        dtype = np.dtype({"f": "float", "i": "int", "u": "uint"}[name[0]] + name[1:])
    else:
        return None
    return dtype if dtype.itemsize == size else None


# clrun dtypes (clrun_dtype) and their numpy counterparts, read from the library.
DTYPES = {code: dtype for code, dtype in ((code, _numpy_of(name, size))
                                          for code, (name, size) in _lib.dtypes().items())
          if dtype is not None}
DTYPE_CODES = {dtype: code for code, dtype in DTYPES.items()}


_KINDS = ", ".join(str(d) for d in DTYPES.values())


def numpy_dtype(dtype):
    """The numpy dtype given, when clrun tensors can have it (DTYPES: float32, float16,
    float64, the signed and unsigned integers of 8 to 64 bits, bool)."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPE_CODES:
        raise InvalidArgumentError(INVALID_ARGUMENT, "clrun tensors are %s, not %s" % (_KINDS, dtype))
    return dtype


def _device_dtype(array):
    """The dtype an array keeps on the device: its own when clrun has it, else the clrun dtype of
    its kind (other integers: int32 or int64 by size; other floats: float32)."""
    if array.dtype in DTYPE_CODES:
        return array.dtype
    if array.dtype.kind in "iu":
        return np.dtype(np.int64 if array.dtype.itemsize > 4 else np.int32)
    if array.dtype.kind == "f":
        return np.dtype(np.float32)
    raise InvalidArgumentError(INVALID_ARGUMENT, "clrun tensors are %s; cannot convert %s"
                               % (_KINDS, array.dtype))


def _same_kind(source, dtype):
    """True when values of `source` may become `dtype` by the binding's rule: within a kind
    (floats to floats, signed or unsigned integers to integers, bool to bool)."""
    kinds = {"f": "f", "i": "iu", "u": "iu", "b": "b"}
    return source.kind in kinds.get(dtype.kind, dtype.kind)


def as_host_array(value, dtype, what):
    """`value` as a C-contiguous numpy array of `dtype` (0-d stays 0-d), converting only within
    a kind (float64 -> float32, int64 -> int32 when every value fits). A numpy array or scalar
    of another kind (int32 for a float32 input) is refused with a TypeError, as onnxruntime
    refuses it; plain Python numbers and lists, which have no dtype of their own, take
    `dtype`."""
    typed = isinstance(value, (np.ndarray, np.generic))
    array = np.asarray(value)
    if array.dtype != dtype:
        if typed:
            convertible = _same_kind(array.dtype, dtype)
        else:
            convertible = array.dtype.kind in "biuf" and np.can_cast(array.dtype, dtype,
                                                                     casting="same_kind")
        if not convertible:
            raise type_error("%s: needs %s values, got %s" % (what, dtype, array.dtype))
        if dtype.kind == "i" and array.size and array.dtype.kind in "iu":
            info = np.iinfo(dtype)
            if array.min() < info.min or array.max() > info.max:
                raise InvalidArgumentError(INVALID_ARGUMENT, "%s: values outside the range of %s"
                                           % (what, dtype))
        array = array.astype(dtype)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).reshape(array.shape)  # 0-d stays 0-d
    return array


def host_feeds(feeds, named, inputs, shape_of, mismatch):
    """The host arrays of `inputs` (infos with name, dtype, shape), in their order, from a dict
    {name: array} and keyword arguments: each by as_host_array, of the shape shape_of(info);
    mismatch(info, shape) says why another shape is refused. An unknown name, a missing input
    or a wrong shape is an InvalidArgumentError naming it."""
    if feeds is not None and not isinstance(feeds, Mapping):
        raise type_error("feeds is a dict {input name: array}, not %r" % (type(feeds).__name__,))
    given = dict(feeds or {}, **named)
    known = {i.name for i in inputs}
    extra = sorted(set(given) - known)
    if extra:
        raise InvalidArgumentError(INVALID_ARGUMENT, "no input named %s (inputs: %s)"
                                   % (", ".join(map(repr, extra)), ", ".join(sorted(known))))
    arrays = []
    for info in inputs:
        if info.name not in given:
            raise InvalidArgumentError(INVALID_ARGUMENT, "input '%s' is not given" % info.name)
        array = as_host_array(given[info.name], info.dtype, "input '%s'" % info.name)
        if array.shape != tuple(shape_of(info)):
            raise InvalidArgumentError(INVALID_ARGUMENT, mismatch(info, array.shape))
        arrays.append(array)
    return arrays


def host_pointers(arrays):
    """C arrays of the arrays' data pointers and byte sizes (one spare entry: never empty)."""
    pointers = (_lib.c_void_p * (len(arrays) + 1))(*[a.ctypes.data for a in arrays])
    sizes = (_lib.c_uint64 * (len(arrays) + 1))(*[a.nbytes for a in arrays])
    return pointers, sizes


# ---- devices ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """An OpenCL device, with the facts clrun uses (clrun_device_info).

    ``default`` is true for the device a :class:`Context` chooses without a selector
    (CLRUN_PLATFORM and CLRUN_DEVICE apply). Pass a Device as ``Context(device=...)``.
    """
    index: int            # position among every device of every platform
    platform_index: int
    name: str
    vendor: str
    type: str             # "GPU", "CPU", "accelerator", "custom" or "other"
    platform_name: str
    version: str          # CL_DEVICE_VERSION
    driver_version: str
    opencl_c_version: str
    global_mem: int       # bytes
    max_alloc: int        # bytes, CL_DEVICE_MAX_MEM_ALLOC_SIZE
    local_mem: int
    base_addr_align: int  # bytes a sub-buffer origin must be a multiple of
    compute_units: int
    max_work_group: int
    profiling: bool
    out_of_order: bool
    fp16: bool
    fp64: bool
    default: bool = False


def _device(info, default=False):
    return Device(
        index=info.device_index, platform_index=info.platform_index, name=_lib.text(info.name),
        vendor=_lib.text(info.vendor), type=_lib.text(info.type),
        platform_name=_lib.text(info.platform_name), version=_lib.text(info.version),
        driver_version=_lib.text(info.driver_version), opencl_c_version=_lib.text(info.c_version),
        global_mem=info.global_mem, max_alloc=info.max_alloc, local_mem=info.local_mem,
        base_addr_align=info.base_addr_align, compute_units=info.compute_units,
        max_work_group=info.max_work_group, profiling=info.profiling,
        out_of_order=info.out_of_order, fp16=info.fp16, fp64=info.fp64, default=default)


def devices():
    """Every OpenCL device of every platform, in loader order, as :class:`Device` values.

    Raises :class:`clrun.NoPlatformError` when no OpenCL platform is installed.
    """
    listing = _lib.POINTER(_lib.DeviceInfo)()
    count = _lib.c_size_t()
    check(_lib.device_list(_lib.byref(listing), _lib.byref(count)))
    try:
        chosen = _lib.c_size_t(count.value)
        platform = os.environ.get("CLRUN_PLATFORM", "").encode() or None
        device = os.environ.get("CLRUN_DEVICE", "").encode() or None
        if _lib.device_select(listing, count, platform, device, _lib.byref(chosen)) != 0:
            chosen.value = count.value  # the selection matches nothing: no default
        return [_device(listing[i], i == chosen.value) for i in range(count.value)]
    finally:
        _lib.device_list_free(listing)


# ---- lifetimes --------------------------------------------------------------------------------
#
# The C objects live in small state objects, not in the user-facing wrappers, so that a
# finalizer can free them without keeping the wrapper alive. A context's state knows the states
# of everything made from it (arrays, models) and frees them first when it closes, so closing a
# context, or the interpreter exiting, never frees the context under a live child.


class _ContextState:
    def __init__(self, pointer):
        self.pointer = pointer
        self.children = set()
        self.lock = threading.Lock()

    def adopt(self, child):
        with self.lock:
            self.children.add(child)

    def forget(self, child):
        with self.lock:
            self.children.discard(child)

    def require_open(self):
        if self.pointer is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "the context is closed")

    def close(self):
        if self.pointer is None:
            return
        with self.lock:
            children = list(self.children)
        for child in children:
            child.close()
        _lib.context_destroy(self.pointer)
        self.pointer = None


class _ArrayState:
    def __init__(self, context, buffer):
        self.context = context
        self.buffer = buffer
        self.freed = False
        self.consumed_by = None  # the model (its state) whose run took the memory, when donated
        self.consumed_as = None  # the input name it was donated as

    def require_live(self):
        if self.freed or self.context.pointer is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "this device array was freed (or its "
                                       "context closed)")

    def donated_error(self, status, message):
        """The error for a use of this consumed array: the library's own donation error when it
        gave one, else the binding's (the library no longer knows the block once its executor
        freed it and the pool handed it to a new owner)."""
        if status == DONATED:
            return error(DONATED, message)
        return DonatedError(DONATED, "this device array was donated to a run of model '%s' (as "
                            "input '%s') and its memory belongs to the model; upload a new one "
                            "with ctx.array()" % (self.consumed_by.name, self.consumed_as))

    def consume(self, model, name):
        """The run of `model` took this buffer: the model frees it, never this array."""
        self.consumed_by = model
        self.consumed_as = name
        self.context.forget(self)

    def unconsume(self):
        """The run refused its inputs before taking any: the buffer is this array's again."""
        self.consumed_by = None
        self.consumed_as = None
        self.context.adopt(self)

    def close(self):
        if self.freed:
            return
        self.freed = True
        if self.consumed_by is None and self.context.pointer is not None and self.buffer.mem:
            _lib.free(self.context.pointer, _lib.byref(self.buffer))
        self.context.forget(self)


# ---- device arrays ----------------------------------------------------------------------------


class DeviceArray:
    """An array in device memory, a block of the context's pool.

    Made by :meth:`Context.array`; read back with :meth:`numpy` (or ``np.asarray``). Passing it
    to a model avoids the upload, so repeated runs do not copy through the host. When passed for
    an input the model donates, its memory goes to the run: any later use raises
    :class:`clrun.DonatedError`. Freed by :meth:`free`, by garbage collection, or with its
    context.
    """

    def __init__(self, context, state, shape, dtype):
        self._context = context  # keeps the context open while the array lives
        self._state = state      # adopted by the context, its buffer allocated
        self._finalizer = weakref.finalize(self, _ArrayState.close, self._state)
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def nbytes(self):
        """Bytes of device memory the array holds."""
        return self._state.buffer.size

    @property
    def size(self):
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def donated(self):
        """True once a run consumed the array (it can no longer be used)."""
        return self._state.consumed_by is not None

    @property
    def context(self):
        """The :class:`Context` the memory belongs to."""
        return self._context

    def numpy(self):
        """Copies the array to host memory as a new numpy array."""
        state = self._state
        state.require_live()
        out = np.empty(self.shape, self.dtype)
        context = state.context.pointer
        status = _lib.buffer_read(context, _lib.byref(state.buffer), out.ctypes.data)
        if state.consumed_by is not None:  # the library refuses it: its bytes are not ours
            raise state.donated_error(status, _lib.text(_lib.last_error(context)))
        check(status, context)
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def free(self):
        """Returns the memory to the pool now (also done by garbage collection). A donated
        array's memory belongs to the model: freeing it does nothing more."""
        self._finalizer()

    def __repr__(self):
        state = "donated" if self.donated else "freed" if self._state.freed else "%d bytes" % self.nbytes
        return "DeviceArray(shape=%s, dtype=%s, %s)" % (self.shape, self.dtype, state)


# ---- contexts ---------------------------------------------------------------------------------


def _tristate(value):
    """The C options' convention: 1 on, -1 off, 0 from the environment."""
    return 0 if value is None else (1 if value else -1)


def _selector(value):
    if value is None:
        return None
    if isinstance(value, Device):
        return str(value.index).encode()
    return str(value).encode()


def _size(value, what):
    """A number of bytes above 0: an int, or text as CLRUN_POOL_LIMIT takes it ("64M", "1GiB",
    "4096"), parsed by the library (clrun_parse_size)."""
    if isinstance(value, str):
        parsed = _lib.c_uint64()
        if not _lib.parse_size(value.encode(), _lib.byref(parsed)) or parsed.value == 0:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s: %r is not a size above 0 (bytes, "
                                       "with an optional K, M, G or T suffix: '64M', '1GiB')"
                                       % (what, value))
        return parsed.value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise type_error("%s is a number of bytes (an int, or text such as '64M'), not %r"
                         % (what, value))
    if value <= 0:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s must be a number of bytes above 0, not "
                                   "%r" % (what, value))
    if value >= 1 << 64:  # a c_uint64 would keep the low 64 bits: another size, silently
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s is %r bytes: at most 2^64 - 1"
                                   % (what, value))
    return int(value)


class Context:
    """One device with its OpenCL context and queue, its built kernels and its memory pool.

    Arguments left as None take their value from the environment (CLRUN_PLATFORM, CLRUN_DEVICE,
    CLRUN_ALLOCATOR, CLRUN_QUEUE, CLRUN_DEBUG, CLRUN_CACHE, CLRUN_CACHE_DIR, CLRUN_POOL_LIMIT):

    Args:
        device: a :class:`Device`, a device index, or a case-insensitive substring of its name.
        allocator: the pool strategy, "tlsf", "buddy", "slab" or "bump", or an executor mode, "naive"
            or "planned", that models loaded without mode= then use.
        pool_limit: the most bytes the pool may reserve from the driver: an int > 0, or text
            with a size suffix as CLRUN_POOL_LIMIT takes it ("64M", "1GiB").
        platform: a platform index or name substring.
        guard: True for guard mode (red zones checked on free and by :meth:`check`).
        cache: False to turn off the on-disk cache of compiled kernels.
        cache_dir: where that cache lives.
        out_of_order: True to ask for an out-of-order queue.

    Use it as a context manager (``with clrun.Context() as ctx:``) or call :meth:`close`;
    garbage collection closes it too. Closing frees every array and model made from it.
    """

    def __init__(self, device=None, allocator=None, pool_limit=None, *, platform=None,
                 guard=None, cache=None, cache_dir=None, out_of_order=None):
        options = _lib.ContextOptions()
        _lib.context_options_init(_lib.byref(options))
        options.platform = _selector(platform)
        options.device = _selector(device)
        options.allocator = allocator.encode() if allocator is not None else None
        options.out_of_order = _tristate(out_of_order)
        options.guard = _tristate(guard)
        options.cache = _tristate(cache)
        options.cache_dir = os.fsencode(cache_dir) if cache_dir is not None else None
        if pool_limit is not None:
            options.pool_limit = _size(pool_limit, "pool_limit")
        pointer = _lib.context_p()
        check(_lib.context_create(_lib.byref(options), _lib.byref(pointer)))
        self._state = _ContextState(pointer)
        self._finalizer = weakref.finalize(self, _ContextState.close, self._state)

    # -- lifetime --

    def close(self):
        """Frees every model and device array of the context, then the context itself."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._state.pointer is None

    def _pointer(self):
        self._state.require_open()
        return self._state.pointer

    # -- facts --

    @property
    def device(self):
        """The context's :class:`Device`."""
        return _device(_lib.context_device(self._pointer()).contents)

    @property
    def cl_context(self):
        """The underlying cl_context handle, as an int (for OpenCL interoperation)."""
        return _lib.context_cl(self._pointer())

    # -- memory --

    def array(self, value, dtype=None, label=None):
        """Uploads `value` (a numpy array or anything np.asarray takes) once and returns a
        :class:`DeviceArray` of the same dtype, or of `dtype` (converted within a kind: float64
        to float32, int64 to int32 when every value fits). float128 becomes float32. `label` names the block in guard reports and the allocation
        log."""
        host = np.asarray(value)
        dtype = numpy_dtype(dtype) if dtype is not None else _device_dtype(host)
        host = as_host_array(host, dtype, label or "array")
        pointer = self._pointer()
        # The array's state owns the buffer before the library fills it, so that an exception
        # (a KeyboardInterrupt) anywhere from here frees the block at once.
        state = _ArrayState(self._state, _lib.Buffer())
        self._state.adopt(state)
        try:
            check(_lib.alloc_ex(pointer, host.nbytes, 0, label.encode() if label else None,
                                _lib.byref(state.buffer)), pointer)
            check(_lib.buffer_write(pointer, _lib.byref(state.buffer), host.ctypes.data),
                  pointer)
            return DeviceArray(self, state, host.shape, dtype)
        except BaseException:
            state.close()
            raise

    def memory_stats(self):
        """What the pool holds, as a dict of the C statistics (clrun_memory_stats): strategy,
        in_use, in_use_peak, held, reserved, reserved_peak, alloc_count, free_count,
        driver_allocs, driver_frees, chunks, free_bytes, largest_free, fragmentation, limit,
        resident, raw."""
        pointer = self._pointer()
        stats = _lib.MemoryStats()
        check(_lib.memory_stats_get(pointer, _lib.byref(stats)), pointer)
        out = {name: getattr(stats, name) for name in _lib.fields(_lib.MemoryStats)}
        out["strategy"] = _lib.text(stats.strategy)
        return out

    def reset_peaks(self):
        """Starts in_use_peak and reserved_peak again from the current values."""
        _lib.memory_reset_peaks(self._pointer())

    def trim(self):
        """Gives every chunk that holds no live block back to the driver; returns the bytes."""
        pointer = self._pointer()
        released = _lib.c_uint64()
        check(_lib.pool_trim(pointer, _lib.byref(released)), pointer)
        return released.value

    def check(self):
        """Guard mode: checks every live block's red zones now (raises clrun.GuardError)."""
        pointer = self._pointer()
        check(_lib.pool_check(pointer), pointer)

    # -- models --

    def load(self, source, *, dims=None, shapes=None, fusion=None, mode=None, donate=None,
             profile=False, plan_time_limit=None, strict_donation=False, fold=None,
             constants=None, weights=None, memory_budget=None):
        """Loads a model and prepares it for this context; returns a :class:`clrun.Model`.

        Args:
            source: a ``.graph`` file (docs/graph-format.md), an ``.onnx`` model, or the bytes
                of an ONNX model (as onnxruntime.InferenceSession takes them).
            dims: ONNX only: values of symbolic dimensions, e.g. ``{"batch": 8}``. Dimensions
                left unbound are taken from the arrays each run is fed (one executor per
                distinct binding, prepared on first use and kept).
            shapes: ONNX only: whole input shapes, e.g. ``{"x": (8, 3, 224, 224)}``.
            constants: ONNX only: inputs fixed at load, e.g. ``{"sr": 16000}`` (an array, or a
                number the library converts exactly to the input's type); what they decide
                (shapes, an If's branch) is settled at load. Such an input is no longer fed.
            fusion: fuse groups of elementwise nodes into one generated kernel each (True,
                False; None: CLRUN_FUSION, default on). Never changes a result.
            fold: fold at load: nodes of constants into constants, batch norms into the
                convolution before them (True, False; None: CLRUN_FOLD, default on). Batch
                norm folding changes bits (within 1e-5 of the output's largest magnitude).
            mode: "pooled" (blocks from the pool), "planned" (one arena laid out ahead by the
                static planner) or "naive" (one driver buffer per tensor); None: the mode the
                context's allocator names (Context(allocator=...), else CLRUN_ALLOCATOR: naive,
                planned, or pooled for a strategy).
            donate: names of the inputs whose device memory each run may consume (XLA's
                donate_argnums); None keeps what the file says.
            profile: record each node's device time, for :meth:`clrun.Model.trace`.
            plan_time_limit: planned mode: the planner's budget in seconds (default 1; 0 runs
                its constructions only).
            strict_donation: a donated input that no output can take is an error
                (clrun.InvalidArgumentError) instead of a clrun.UnusedDonationWarning.
            weights: "f16", "bf16" or "int8" stores the weights of matmul and the convolutions at that
                width (int8: one scale per output channel), widened in registers by the
                matmul and conv2d kernels (clrun_graph_narrow_weights, ``clrun run --weights``):
                resident bytes 2x or nearly 4x smaller, no f32 copy at run time, results near
                the f32 model's, not equal;
                :attr:`clrun.Model.weights_report` says what was narrowed. None: as stored.
            memory_budget: bytes (or "64M") each executor may hold, its weights and its arena
                (planned mode unless ``mode`` names another): tensors alive across the peak
                are recomputed after it until it fits, with the same outputs bit for bit;
                ``model.stats()`` gives held_bytes, recomputed_*, offloaded_* and host_bytes (the
                tensors copied to host memory and back instead, named in ``offloaded``). A budget nothing meets
                raises clrun.OutOfMemoryError with the least found.
        """
        from ._model import Model
        return Model(self, source, dims=dims, shapes=shapes, fusion=fusion, mode=mode,
                     donate=donate, profile=profile, plan_time_limit=plan_time_limit,
                     strict_donation=strict_donation, fold=fold, constants=constants,
                     weights=weights, memory_budget=memory_budget)

    def train(self, model, loss, optimizer=None, *, params=None, label_dtype="int64", mode=None,
              fusion=None, keep_gradients=False, dims=None, shapes=None, remat=None,
              memory_budget=None, data_parallel=None, bucket_bytes=None):
        """Makes a model's train step on this context; returns a :class:`clrun.TrainStep`.

        Args:
            model: a ``.graph`` file, an ``.onnx`` model (a path, or its bytes; dims= and
                shapes= bind its dimensions as for :meth:`load`), or a loaded
                :class:`clrun.Model` (its graph).
            loss: ``"xent:TENSOR"`` (softmax cross-entropy of logits [..., classes] against
                integer labels, the mean over rows), ``"mse:TENSOR"`` (mean squared error
                against targets) or ``"scalar:TENSOR"`` (the model computes its loss, one f32
                element); TENSOR is a model tensor's name or identifier.
            optimizer: :class:`clrun.SGD`, :class:`clrun.Adam` or :class:`clrun.AdamW`
                (PyTorch's semantics); None: Adam with PyTorch's defaults.
            params: names of the weights to train; None: every weight the loss depends on
                through a gradient (f32 constants of rank >= 1).
            label_dtype: xent: "int64" (the default) or "int32".
            mode, fusion: how the step runs, as for :meth:`load`.
            keep_gradients: keep each step's gradients for :meth:`clrun.TrainStep.gradients`
                (costs their memory).
            remat: recompute activations in the backward pass instead of keeping them:
                "dots_saveable", "nothing_saveable", "names:T1,T2", "except:T1,T2", "sqrt_n",
                "every:K" or "cuts:K"
                (docs/training.md); the same results bit for bit, a lower peak, more work.
            memory_budget: bytes (or "64M") the trainer may hold as its pool counts them,
                the step run in planned mode: the step as it is, else the least recomputation
                that fits (docs/training.md; remat= alone when given);
                clrun.InvalidArgumentError naming the least any rewrite holds, or the smallest
                peak found, when none does. Without it the pool's limit is the budget when the
                step may not fit in it.
            data_parallel: a :class:`clrun.mpi.DataParallel` (under mpirun): each step's
                gradients all-reduced over its ranks, scaled by this rank's share of the global
                batch (set by its share()), so that every rank applies the update of the global
                batch; feed each step this rank's rows. The model's batch is the rank's rows.
            bucket_bytes: with data_parallel, the gradients all-reduced in buckets of at least
                this many bytes (or "256K") while the backward pass runs; 0: one all-reduce
                after it. Default 1 MiB, as clrun train's --bucket.

        Raises clrun.UnsupportedError naming an op without a gradient rule, and
        clrun.InvalidArgumentError for a loss tensor or parameter the model lacks.
        """
        from ._train import TrainStep
        return TrainStep(self, model, loss, optimizer, params=params, label_dtype=label_dtype,
                         mode=mode, fusion=fusion, keep_gradients=keep_gradients, dims=dims,
                         shapes=shapes, remat=remat, memory_budget=memory_budget,
                         data_parallel=data_parallel, bucket_bytes=bucket_bytes)

    def gradient(self, model, loss, wrt=None, *, dims=None, shapes=None, mode=None,
                 fusion=None):
        """The gradient of a model's scalar loss as a model of its own (clrun_graph_gradient,
        ``clrun grad``): a :class:`clrun.Model` on this context, taking the model's inputs,
        whose outputs are the loss, then ``grad.NAME`` for each tensor differentiated, in order.

        Args:
            model: a ``.graph`` file, an ``.onnx`` model (a path, or its bytes; dims= and
                shapes= bind its dimensions as for :meth:`load`), or a loaded
                :class:`clrun.Model` (its graph).
            loss: the name (or id) of the loss tensor: one float element (rank 0, or every
                dimension 1).
            wrt: names of the inputs or weights to differentiate; None: every trainable
                weight (f32 constants of rank >= 1 the loss depends on through a gradient).
            mode, fusion: how the model runs, as for :meth:`load`.

        A tensor of `wrt` the loss does not depend on gets a gradient of zeros and a
        UserWarning naming it. Raises clrun.UnsupportedError naming an op on the loss' path
        without a gradient rule, and clrun.InvalidArgumentError for a loss or wrt tensor the
        model lacks or a loss that is not one float element. :meth:`clrun.Model.save_graph`
        writes the result as ``clrun grad --out`` does.
        """
        from ._grad import gradient
        return gradient(self, model, loss, wrt, dims=dims, shapes=shapes, mode=mode,
                        fusion=fusion)

    def __repr__(self):
        if self.closed:
            return "Context(closed)"
        return "Context(device=%r)" % self.device.name
