"""Gradients as a model (Context.gradient): clrun_graph_gradient's graph, computing a scalar loss
and its gradient with respect to chosen tensors, loaded and ready to run."""

import os
import warnings

import numpy as np

from . import _lib
from .errors import (InvalidArgumentError, UnsupportedError, check, error, type_error,
                     INVALID_ARGUMENT, UNSUPPORTED)


def gradient(context, model, loss, wrt=None, dims=None, shapes=None, mode=None, fusion=None):
    """Context.gradient: see its docstring."""
    from ._model import Model, _check_dims, _check_shapes, _is_bytes, _load_graph, _mode
    if _lib.graph_gradient is None:
        raise UnsupportedError(UNSUPPORTED, "this libclrun has no gradients "
                               "(clrun_graph_gradient)")
    context._pointer()
    if isinstance(loss, bool) or not isinstance(loss, (str, int, np.integer)):
        raise type_error("loss is the name (or id) of the model's scalar loss tensor, not %r"
                         % (loss,))
    if wrt is not None:
        wrt = [wrt] if isinstance(wrt, str) else list(wrt)
        for name in wrt:
            if not isinstance(name, str):
                raise type_error("wrt is a list of the names of the model's inputs or weights, "
                                 "not one holding %r" % (name,))
        if not wrt:
            raise InvalidArgumentError(INVALID_ARGUMENT, "wrt is None (every trainable weight) "
                                       "or a non-empty list of tensor names")
    mode = _mode(mode)
    if fusion is not None and not isinstance(fusion, bool):
        raise InvalidArgumentError(INVALID_ARGUMENT, "fusion is True, False or None")

    if isinstance(model, Model):
        if dims or shapes:
            raise InvalidArgumentError(INVALID_ARGUMENT, "dims= and shapes= apply when the model "
                                       "is given by its path; model '%s' is already loaded"
                                       % model.name)
        executor = model._current()
        with executor.lock:
            if executor.graph is None:
                raise InvalidArgumentError(INVALID_ARGUMENT, "model '%s' is closed" % model.name)
            built = _transform(executor.graph, model.name, loss, wrt)
    elif _is_bytes(model) or isinstance(model, (str, bytes, os.PathLike)):
        what = "<bytes>" if _is_bytes(model) else os.fspath(model)
        graph = _load_graph(bytes(model) if _is_bytes(model) else what, _check_dims(dims),
                            _check_shapes(shapes), what)
        try:
            name = _lib.text(_lib.graph_name(graph)) or (
                os.path.basename(what) if isinstance(what, str) else what)
            built = _transform(graph, name, loss, wrt)
        finally:
            _lib.graph_destroy(graph)  # the gradient's graph is a copy
    else:
        raise type_error("gradient takes a clrun.Model, a path or the bytes of an ONNX model, "
                         "not %s" % type(model).__name__)

    source, loss_name, unused = built
    try:
        result = Model(context, source, mode=None if mode == "context" else mode, fusion=fusion)
    finally:
        source.close()  # destroys the graph unless the model took it
    if unused:
        warnings.warn("the loss '%s' does not depend on %s: %s gradient%s zeros"
                      % (loss_name, ", ".join("'%s'" % n for n in unused),
                         "their" if len(unused) > 1 else "its",
                         "s are" if len(unused) > 1 else " is"), UserWarning, stacklevel=3)
    return result


def _transform(graph, model_name, loss, wrt):
    """clrun_graph_gradient of `graph` (kept, not consumed): (a _GraphSource owning the new
    graph, the loss' name, the names of the wrt tensors the loss does not depend on)."""
    from ._model import _GraphSource
    loss_id = _find(graph, model_name, loss, "loss")
    if wrt is None:  # every trainable weight, as the library chooses them by default
        count = _lib.c_int32()
        status = _lib.graph_trainable(graph, loss_id, None, 0, _lib.byref(count))
        if status:  # a loss that is no float element
            raise error(status, "model '%s': %s"
                        % (model_name, _lib.text(_lib.last_error(None))))
        ids = (_lib.c_int32 * max(1, count.value))()
        check(_lib.graph_trainable(graph, loss_id, ids, count.value, _lib.byref(count)))
        ids = list(ids[:count.value])
    else:
        ids = [_find(graph, model_name, name, "wrt") for name in wrt]
    array = (_lib.c_int32 * max(1, len(ids)))(*ids)
    out = _lib.graph_p()
    unused = _lib.POINTER(_lib.c_int32)()
    unused_count = _lib.c_int32()
    message = _lib.ctypes.create_string_buffer(2048)
    status = _lib.graph_gradient(graph, loss_id, array, len(ids), _lib.byref(out),
                                 _lib.byref(unused), _lib.byref(unused_count), message,
                                 len(message))
    try:
        zeros = [unused[i] for i in range(unused_count.value)]
    finally:
        if unused:
            _lib.libc_free(unused)
    if status:
        raise error(status, "model '%s': %s" % (model_name, _lib.text(message.value)))
    source = _GraphSource(out.value, model_name)
    try:
        _name_gradients(graph, out.value, ids)
    except BaseException:
        source.close()
        raise
    names = [_lib.text(_lib.graph_tensor_name(graph, t)) for t in ids]
    return source, _lib.text(_lib.graph_tensor_name(graph, loss_id)), [names[i] for i in zeros]


def _name_gradients(graph, gradient_graph, ids):
    """Gives each gradient output the model's name of its tensor: the library names it
    grad.IDENTIFIER, and an imported model's weights have names of their own ("fc1.weight"),
    which the outputs then take (grad.fc1.weight)."""
    outputs = _lib.POINTER(_lib.c_int32)()
    n = _lib.graph_outputs(gradient_graph, _lib.byref(outputs))
    for i, t in enumerate(ids[:n - 1]):
        ident = _lib.text(_lib.graph_tensor_ident(graph, t))
        name = _lib.text(_lib.graph_tensor_name(graph, t))
        out = outputs[1 + i]
        if name != ident and _lib.text(_lib.graph_tensor_ident(gradient_graph, out)) == \
                "grad." + ident:
            check(_lib.graph_set_model_name(gradient_graph, out, ("grad." + name).encode()))


def _find(graph, model_name, name, what):
    """The id of tensor `name` (or an id, checked) in the graph, for argument `what`."""
    if isinstance(name, str):
        tensor = _lib.graph_find(graph, name.encode())
        if tensor < 0:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s: model '%s' has no tensor '%s'"
                                       % (what, model_name, name))
        return tensor
    count = _lib.graph_tensor_count(graph)
    if not 0 <= int(name) < count:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s: model '%s' has no tensor id %d (it has "
                                   "%d tensors)" % (what, model_name, int(name), count))
    return int(name)
