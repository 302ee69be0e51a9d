"""Training: a model's train step (forward, loss, backward and optimizer update as one graph)
prepared on a context, with the parameters and the optimizer's state kept on the device between
steps (include/clrun/train.h)."""

import os
import threading
import weakref
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from . import _lib
from ._context import DTYPE_CODES, DTYPES, as_host_array
from .errors import (InvalidArgumentError, UnsupportedError, check, error, type_error,
                     INVALID_ARGUMENT, UNSUPPORTED)

FeedInfo = namedtuple("FeedInfo", "name shape dtype")
FeedInfo.__doc__ = """What a train step is fed: its name, shape (a tuple) and numpy dtype."""


# ---- optimizers -------------------------------------------------------------------------------


def _number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise type_error("%s is a number, not %r" % (what, value))
    return float(value)


class Optimizer:
    """An optimizer's settings (clrun_optimizer): :class:`SGD`, :class:`Adam` or :class:`AdamW`.
    Values are checked by the library when the train step is made (ctx.train)."""

    kind = None

    def _fill(self, out):
        _lib.optimizer_init(_lib.byref(out), _lib.OPTIMIZER_KINDS[self.kind])
        out.lr = self.lr
        out.weight_decay = self.weight_decay

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % item for item in vars(self).items()))


class SGD(Optimizer):
    """PyTorch's torch.optim.SGD: momentum (dampening 0), Nesterov momentum, weight decay added
    to the gradient."""

    kind = "sgd"

    def __init__(self, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        self.lr = _number(lr, "SGD: lr")
        self.momentum = _number(momentum, "SGD: momentum")
        self.nesterov = bool(nesterov)
        self.weight_decay = _number(weight_decay, "SGD: weight_decay")

    def _fill(self, out):
        super()._fill(out)
        out.momentum = self.momentum
        out.nesterov = self.nesterov


class Adam(Optimizer):
    """PyTorch's torch.optim.Adam (weight decay added to the gradient, as L2)."""

    kind = "adam"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        name = type(self).__name__
        self.lr = _number(lr, name + ": lr")
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise type_error("%s: betas is a pair (beta1, beta2), not %r" % (name, betas)) from None
        self.betas = (_number(beta1, name + ": betas[0]"), _number(beta2, name + ": betas[1]"))
        self.eps = _number(eps, name + ": eps")
        self.weight_decay = _number(weight_decay, name + ": weight_decay")

    def _fill(self, out):
        super()._fill(out)
        out.beta1, out.beta2 = self.betas
        out.eps = self.eps


class AdamW(Adam):
    """PyTorch's torch.optim.AdamW (decoupled weight decay: p times 1 - lr * weight_decay)."""

    kind = "adamw"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(lr, betas, eps, weight_decay)


# ---- the trainer ------------------------------------------------------------------------------


class _TrainState:
    """The C trainer, freed by close() or with its context."""

    def __init__(self, context):
        self.context = context
        self.pointer = None
        self.lock = threading.Lock()
        self.data_parallel = None  # the clrun.mpi handle whose hooks the trainer calls

    def close(self):
        with self.lock:
            if self.pointer is not None:
                dp, self.data_parallel = self.data_parallel, None
                # A broken clrun.mpi handle left its timed-out all-reduce in flight (MPI cannot
                # cancel a collective): MPI may still write into the trainer's gradient buffer,
                # which train_destroy frees. Leaked on purpose: the job is to end (abort()).
                if dp is None or not dp.broken():
                    _lib.train_destroy(self.pointer)
                self.pointer = None
        self.context.forget(self)


def _parse_loss(loss):
    kinds = ", ".join("'%s:TENSOR'" % k for k in _lib.LOSS_KINDS)
    if not isinstance(loss, str):
        raise type_error("loss is %s (TENSOR: a tensor of the model), not %r" % (kinds, loss))
    kind, sep, tensor = loss.partition(":")
    if not sep or kind not in _lib.LOSS_KINDS or not tensor:
        raise InvalidArgumentError(INVALID_ARGUMENT, "loss %r: it is %s, TENSOR a tensor of the "
                                   "model (the logits for xent)" % (loss, kinds))
    return kind, tensor


def _label_dtype(value):
    try:
        dtype = np.dtype(value) if value is not None else None
    except TypeError:
        dtype = None
    if dtype is None or dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise InvalidArgumentError(INVALID_ARGUMENT, "label_dtype is 'int64' or 'int32', not %r"
                                   % (value,))
    return DTYPE_CODES[dtype]


def _info(type_):
    return DTYPES[type_.dtype], tuple(type_.shape[d] for d in range(type_.rank))


class TrainStep:
    """A model's train step on a context, made by :meth:`clrun.Context.train`.

    Call it with a batch, ``loss = step(x=..., labels=...)`` (by feed name, or positionally in
    the order of :attr:`feeds`): it runs the forward pass, the loss, the backward pass and the
    optimizer's update of every parameter as one graph on the device, and returns the batch's
    loss (before the update) as a float. :attr:`last` has the step's figures. The parameters and
    the optimizer's state stay on the device between steps; :meth:`params` copies them out,
    :meth:`save` and :meth:`load` write and read them (a state read back gives the same next
    step, bit for bit). Free it with :meth:`close` (or garbage collection, or with its context).
    """

    def __init__(self, context, model, loss, optimizer=None, params=None, label_dtype="int64",
                 mode=None, fusion=None, keep_gradients=False, dims=None, shapes=None,
                 remat=None, memory_budget=None, data_parallel=None, bucket_bytes=None):
        from ._context import _size
        from ._model import (Model, _check_dims, _check_shapes, _is_bytes, _load_graph, _mode)
        if _lib.train_create is None:
            raise UnsupportedError(UNSUPPORTED, "this libclrun has no training "
                                   "(clrun_train_create)")
        self._context = context
        pointer = context._pointer()
        kind, tensor = _parse_loss(loss)
        if optimizer is None:
            optimizer = Adam()
        if not isinstance(optimizer, Optimizer):
            raise type_error("optimizer is clrun.SGD(...), clrun.Adam(...) or clrun.AdamW(...), "
                             "not %r" % (optimizer,))
        if params is not None:
            params = [params] if isinstance(params, str) else list(params)
            for name in params:
                if not isinstance(name, str):
                    raise type_error("params is a list of the names of the model's weights, not "
                                     "one holding %r" % (name,))
        if fusion is not None and not isinstance(fusion, bool):
            raise InvalidArgumentError(INVALID_ARGUMENT, "fusion is True, False or None")
        if remat is not None and not isinstance(remat, str):
            raise type_error("remat is a policy's name (dots_saveable, nothing_saveable, "
                             "names:T1,T2, except:T1,T2, sqrt_n, every:K, cuts:K) or None, not %r" % (remat,))
        options = _lib.TrainOptions()
        _lib.train_options_init(_lib.byref(options))
        graph_options = options.graph
        graph_options.loss = _lib.LOSS_KINDS[kind]
        graph_options.loss_tensor = tensor.encode()
        graph_options.label_dtype = _label_dtype(label_dtype)
        names = None
        if params is not None:
            names = (_lib.c_char_p * max(1, len(params)))(*[p.encode() for p in params])
            graph_options.params = names
            graph_options.param_count = len(params)
        optimizer._fill(graph_options.optimizer)
        graph_options.keep_gradients = bool(keep_gradients)
        remat_text = remat.encode() if remat else None  # alive until the step is made
        graph_options.remat = remat_text
        if memory_budget is not None:
            graph_options.memory_budget = _size(memory_budget, "memory_budget")
        options.exec.mode = _lib.EXEC_MODES[_mode(mode)]
        if fusion is not None:
            options.exec.fusion = 1 if fusion else -1
        if data_parallel is not None:
            from .mpi import DataParallel
            if not isinstance(data_parallel, DataParallel):
                raise type_error("data_parallel is a clrun.mpi.DataParallel, not %r"
                                 % (data_parallel,))
            if bucket_bytes is None:
                buckets = 1 << 20
            elif isinstance(bucket_bytes, int) and not isinstance(bucket_bytes, bool) and \
                    bucket_bytes == 0:
                buckets = 0
            else:
                buckets = _size(bucket_bytes, "bucket_bytes")
            data_parallel._fill(options, buckets)
        elif bucket_bytes is not None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "bucket_bytes applies with "
                                       "data_parallel= only")
        self.data_parallel = data_parallel  # the hooks' handle: alive while the step is
        self.loss = loss
        self.optimizer = optimizer
        self.keep_gradients = bool(keep_gradients)
        self.remat = remat

        self._state = _TrainState(context._state)
        if data_parallel is not None:
            self._state.data_parallel = data_parallel._handle
        context._state.adopt(self._state)
        self._finalizer = weakref.finalize(self, _TrainState.close, self._state)
        try:
            train = _lib.train_p()
            if isinstance(model, Model):
                if dims or shapes:
                    raise InvalidArgumentError(INVALID_ARGUMENT, "dims= and shapes= apply when "
                                               "the model is given by its path; model '%s' is "
                                               "already loaded" % model.name)
                executor = model._current()
                with executor.lock:
                    if executor.graph is None:
                        raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed"
                                                   % model.name)
                    status = _lib.train_create(pointer, executor.graph, _lib.byref(options),
                                               _lib.byref(train))
                self.name = model.name
            elif _is_bytes(model) or isinstance(model, (str, bytes, os.PathLike)):
                what = "<bytes>" if _is_bytes(model) else os.fspath(model)
                graph = _load_graph(bytes(model) if _is_bytes(model) else what,
                                    _check_dims(dims), _check_shapes(shapes), what)
                try:
                    self.name = _lib.text(_lib.graph_name(graph)) or (
                        os.path.basename(what) if isinstance(what, str) else what)
                    status = _lib.train_create(pointer, graph, _lib.byref(options),
                                               _lib.byref(train))
                finally:
                    _lib.graph_destroy(graph)  # the trainer keeps its own
            else:
                raise type_error("train takes a clrun.Model, a path or the bytes of an ONNX "
                                 "model, not %s" % type(model).__name__)
            check(status, pointer)
            self._state.pointer = train.value
            if data_parallel is not None:
                data_parallel._adopt(self)
            self._describe()
        except BaseException:
            self.close()
            raise

    def _describe(self):
        train = self._state.pointer
        name = _lib.c_char_p()
        type_ = _lib.TensorType()
        self.feeds = []
        for i in range(_lib.train_feed_count(train)):
            check(_lib.train_feed_info(train, i, _lib.byref(name), _lib.byref(type_)),
                  self._context._pointer())
            dtype, shape = _info(type_)
            self.feeds.append(FeedInfo(_lib.text(name.value), shape, dtype))
        self._feed_index = {f.name: i for i, f in enumerate(self.feeds)}
        self._params = []
        for i in range(_lib.train_param_count(train)):
            check(_lib.train_param_info(train, i, _lib.byref(name), _lib.byref(type_)),
                  self._context._pointer())
            dtype, shape = _info(type_)
            self._params.append(FeedInfo(_lib.text(name.value), shape, dtype))
        names = _lib.POINTER(_lib.c_char_p)()
        n = _lib.train_frozen(train, _lib.byref(names))
        self.frozen = [_lib.text(names[i]) for i in range(n)]
        self._xent = self.loss.startswith("xent:")
        self.last = None

    # -- lifetime --

    def close(self):
        """Frees the trainer: its step, its parameters and optimizer state on the device."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._state.pointer is None

    @property
    def context(self):
        return self._context

    @property
    def parameters(self):
        """The trained parameters, a list of (name, shape, dtype) in the step's order."""
        return list(self._params)

    def _pointer(self):
        """The C trainer; the caller holds the state's lock."""
        self._context._pointer()
        if self._state.pointer is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "train step of model '%s' is closed"
                                       % self.name)
        return self._state.pointer

    # -- feeds --

    def _host_feeds(self, args, named, what):
        """The feeds as C-contiguous numpy arrays of each feed's dtype and shape, in order."""
        if len(args) == 1 and isinstance(args[0], Mapping) and not named:
            named, args = dict(args[0]), ()
        if len(args) > len(self.feeds):
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s takes %d feeds (%s), %d given"
                                       % (what, len(self.feeds), self._feed_names(), len(args)))
        given = {self.feeds[i].name: value for i, value in enumerate(args)}
        for name, value in named.items():
            if name not in self._feed_index:
                raise InvalidArgumentError(INVALID_ARGUMENT, "%s has no feed '%s' (its feeds: %s)"
                                           % (what, name, self._feed_names()))
            if name in given:
                raise InvalidArgumentError(INVALID_ARGUMENT, "%s: feed '%s' given twice "
                                           "(positionally and by name)" % (what, name))
            given[name] = value
        missing = [f.name for f in self.feeds if f.name not in given]
        if missing:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s: missing feed%s %s (its feeds: %s)"
                                       % (what, "s" if len(missing) > 1 else "",
                                          ", ".join("'%s'" % n for n in missing),
                                          self._feed_names()))
        arrays = []
        for feed in self.feeds:
            label = "feed '%s'" % feed.name
            host = as_host_array(given[feed.name], feed.dtype, label)
            if host.shape != feed.shape:
                raise InvalidArgumentError(INVALID_ARGUMENT, "%s has shape %s, %s given"
                                           % (label, feed.shape, host.shape))
            arrays.append(host)
        pointers = (_lib.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        return arrays, pointers

    def _feed_names(self):
        return ", ".join("%s %s%s" % (f.name, f.dtype, list(f.shape)) for f in self.feeds)

    # -- steps --

    def __call__(self, *args, **named):
        """One step on a batch; returns its loss (before the update) as a float.

        Feeds go by name (``step(x=..., labels=...)``, or a dict) or positionally in the order
        of :attr:`feeds`: numpy arrays, Python numbers or lists, converted within their kind as
        a model's inputs are (float64 to float32, int32 labels to int64). A label outside
        [0, classes) raises clrun.InvalidArgumentError naming its position and value, and the
        step changes nothing. A loss that comes out NaN or infinite raises
        clrun.InvalidArgumentError after its update (:attr:`last` has it).
        """
        arrays, pointers = self._host_feeds(args, named, "train step of '%s'" % self.name)
        result = _lib.TrainStepResult()
        with self._state.lock:
            train = self._pointer()
            status = _lib.train_step(train, pointers, len(arrays), _lib.byref(result))
            message = _lib.text(_lib.last_error(self._context._pointer())) if status else None
        if result.step:
            xent = result.correct >= 0
            self.last = {"step": result.step, "loss": result.loss,
                         "correct": result.correct if xent else None,
                         "rows": result.rows if xent else None}
        if status:
            raise error(status, message)
        return result.loss

    def evaluate(self, *args, rows=None, **named):
        """The loss (and for xent the rows predicted right) of a batch with the current
        parameters, updating nothing: a dict with loss (the mean over the rows evaluated),
        correct and rows (None for losses other than xent).

        Feeds as for a step. ``rows=`` (xent only): only the first `rows` rows of the batch
        count, so that the last, partial batch of a data set is evaluated exactly (fill the
        rest of the batch with copies of real rows).
        """
        arrays, pointers = self._host_feeds(args, named, "evaluation of '%s'" % self.name)
        if not self._xent:
            if rows is not None:
                raise InvalidArgumentError(INVALID_ARGUMENT, "evaluate: rows= applies to the xent "
                                           "loss; the %s loss is evaluated on whole batches"
                                           % self.loss.partition(":")[0])
            count = -1
        else:
            batch = self.feeds[-1].shape[0] if self.feeds[-1].shape else 1
            if rows is None:
                count = batch
            elif isinstance(rows, bool) or not isinstance(rows, (int, np.integer)):
                raise type_error("evaluate: rows is an int, not %r" % (rows,))
            else:
                count = int(rows)
        result = _lib.TrainEvalResult()
        with self._state.lock:
            train = self._pointer()
            status = _lib.train_evaluate(train, pointers, len(arrays), count, _lib.byref(result))
            message = _lib.text(_lib.last_error(self._context._pointer())) if status else None
        if status:
            raise error(status, message)
        xent = result.correct >= 0
        return {"loss": result.loss, "correct": result.correct if xent else None,
                "rows": result.rows if xent else None}

    # -- the state --

    def _read(self, reader):
        out = {}
        with self._state.lock:
            train = self._pointer()
            for i, (name, shape, dtype) in enumerate(self._params):
                array = np.empty(shape, dtype)
                check(reader(train, i, array.ctypes.data, array.nbytes), self._context._pointer())
                out[name] = array
        return out

    def params(self):
        """The parameters' current values: a dict name -> new numpy array, in the step's
        order (the model's names: a .graph file's constants, an ONNX model's initializers)."""
        return self._read(_lib.train_read_param)

    def gradients(self):
        """The gradients of the last step, a dict name -> new numpy array (a train step made
        with keep_gradients=True, after a step)."""
        return self._read(_lib.train_read_gradient)

    def save(self, path):
        """Writes the train state (parameters, optimizer state, steps done) to `path`."""
        with self._state.lock:
            check(_lib.train_save(self._pointer(), os.fsencode(path)), self._context._pointer())

    def load(self, path):
        """Reads a train state written by :meth:`save` of the same model and optimizer; the
        next step is then the one the saved trainer would have made, bit for bit. A state of
        another model or optimizer raises clrun.InvalidArgumentError naming the first tensor
        that differs, and changes nothing."""
        with self._state.lock:
            check(_lib.train_load(self._pointer(), os.fsencode(path)), self._context._pointer())

    @property
    def steps(self):
        """Steps done (restored by :meth:`load`)."""
        return self.stats()["steps"]

    def stats(self):
        """The trainer's figures (clrun_train_stats) as a dict: steps, params, state_tensors,
        param_bytes, state_bytes, peak_bytes, activation_peak_bytes, lower_bound_bytes,
        donated_bytes, donations (donated_in_place of them over the donated state), unused_donations
        (with their names in unused_donated), remat
        (what the rematerialisation policy did: dropped, repeated_nodes, dropped_bytes,
        repeated_flops),
        remat_policy (the policy, chosen under memory_budget or given), planned_peak_bytes (with
        a memory budget: the chosen step's planned peak), and
        exec, the step executor's own figures as :meth:`clrun.Model.stats` gives them."""
        stats = _lib.TrainStats()
        with self._state.lock:
            train = self._pointer()
            check(_lib.train_stats_get(train, _lib.byref(stats)), self._context._pointer())
            names = _lib.POINTER(_lib.c_char_p)()
            n = _lib.train_unused_donations(train, _lib.byref(names))
            unused = [_lib.text(names[i]) for i in range(n)]
        out = {name: getattr(stats, name) for name in _lib.fields(_lib.TrainStats)}
        execs = {name: getattr(stats.exec, name) for name in _lib.fields(_lib.ExecStats)}
        execs["mode"] = _lib.text(stats.exec.mode)
        execs["allocator"] = _lib.text(stats.exec.allocator)
        out["exec"] = execs
        out["remat"] = {name: getattr(stats.remat, name) for name in _lib.fields(_lib.RematReport)}
        out["remat_policy"] = _lib.text(stats.remat_policy)
        out["unused_donated"] = unused
        return out

    def __repr__(self):
        if self.closed:
            return "TrainStep(%r, closed)" % self.name
        return "TrainStep(%r, loss=%r, optimizer=%r, params=%d, feeds=%s)" % (
            self.name, self.loss, self.optimizer, len(self._params),
            [f.name for f in self.feeds])
