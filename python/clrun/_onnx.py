"""What an ONNX model declares for its inputs, read from its protobuf without the onnx module.

The library binds symbolic dimensions when it imports a model (clrun_onnx_options) but has no
call that lists them before; the binding needs them to take a dimension from the arrays it is
fed. This reads only ModelProto.graph's inputs and initializer names (onnx.proto field numbers
below), skipping everything else without copying it.
"""

import mmap
import os

# onnx.proto field numbers
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_SPARSE_INITIALIZER = 5, 11, 12, 15
_TENSOR_NAME = 8
_SPARSE_VALUES = 1
_VALUE_INFO_NAME, _VALUE_INFO_TYPE = 1, 2
_TYPE_TENSOR = 1
_TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE = 1, 2
_SHAPE_DIM = 1
_DIM_VALUE, _DIM_PARAM = 1, 2

# TensorProto.DataType -> numpy dtype name, for what a model declares before it is imported.
ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
              7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class Malformed(ValueError):
    """Not a protobuf this reader understands (the library then gives its own error)."""


def _varint(buf, i):
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise Malformed("truncated varint")
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf):
    """(field number, value) of a message: an int for varints, a memoryview for bytes; fixed
    fields are skipped."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield field, value
        elif wire == 2:
            length, i = _varint(buf, i)
            if i + length > len(buf):
                raise Malformed("truncated field")
            yield field, buf[i:i + length]
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise Malformed("wire type %d" % wire)


def _text(view):
    return bytes(view).decode("utf-8", "replace")


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def _dims(shape):
    """A TensorShapeProto's dimensions: int (fixed), str (symbolic) or None (unknown)."""
    dims = []
    for field, dim in _fields(shape):
        if field != _SHAPE_DIM:
            continue
        value = None
        for f, v in _fields(dim):
            if f == _DIM_VALUE and isinstance(v, int):
                value = _signed(v)
            elif f == _DIM_PARAM and not isinstance(v, int):
                value = _text(v) or None
        dims.append(value)
    return tuple(dims)


def _input(info):
    name, elem, dims = "", 0, None
    for field, value in _fields(info):
        if field == _VALUE_INFO_NAME and not isinstance(value, int):
            name = _text(value)
        elif field == _VALUE_INFO_TYPE and not isinstance(value, int):
            for f, tensor in _fields(value):
                if f != _TYPE_TENSOR or isinstance(tensor, int):
                    continue
                for g, v in _fields(tensor):
                    if g == _TENSOR_TYPE_ELEM and isinstance(v, int):
                        elem = v
                    elif g == _TENSOR_TYPE_SHAPE and not isinstance(v, int):
                        dims = _dims(v)
    return name, elem, dims


def _tensor_name(tensor):
    for field, value in _fields(tensor):
        if field == _TENSOR_NAME and not isinstance(value, int):
            return _text(value)
    return ""


def _signature(buf):
    inputs, outputs, initialized = [], [], set()
    for field, graph in _fields(buf):
        if field != _MODEL_GRAPH or isinstance(graph, int):
            continue
        for f, value in _fields(graph):
            if isinstance(value, int):
                continue
            if f == _GRAPH_INPUT:
                inputs.append(_input(value))
            elif f == _GRAPH_OUTPUT:
                outputs.append(_input(value))
            elif f == _GRAPH_INITIALIZER:
                initialized.add(_tensor_name(value))
            elif f == _GRAPH_SPARSE_INITIALIZER:
                for g, v in _fields(value):
                    if g == _SPARSE_VALUES and not isinstance(v, int):
                        initialized.add(_tensor_name(v))
    return [i for i in inputs if i[0] not in initialized], outputs


def signature(source):
    """The graph inputs of an ONNX model (a path or bytes) that are not initializers, and its
    outputs, in order, as two lists of (name, ONNX elem_type, dims): dims a tuple of int
    (fixed), str (a symbolic dimension) or None (unknown), or None when the model gives no
    shape. Raises Malformed (or OSError) when it cannot tell."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _signature(memoryview(source).cast("B"))
    with open(os.fspath(source), "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise Malformed("empty file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return _signature(view)
            finally:
                view.release()
