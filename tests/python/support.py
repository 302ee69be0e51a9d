"""Shared helpers of the Python binding's tests (run through tests/python/run.sh)."""

import ctypes
import ctypes.util
import os
import tempfile
import unittest

SRCDIR = os.environ.get("CLRUN_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
CLRUN_BIN = os.environ.get("CLRUN_BIN") or os.path.join(SRCDIR, "clrun")


def tool_environment(**changes):
    """The environment for running the CLI: this one, without the sanitizer runtime that
    run.sh preloads into Python (the CLI links its own)."""
    env = dict(os.environ, **changes)
    if "CLRUN_TEST_TOOL_PRELOAD" in env:
        env["LD_PRELOAD"] = env.pop("CLRUN_TEST_TOOL_PRELOAD")
    return env


def example(name):
    """The path of examples/NAME in the source tree."""
    return os.path.join(SRCDIR, "examples", name)


_xxhash = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
_xxhash.XXH64.restype = ctypes.c_uint64
_xxhash.XXH64.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64]


def xxh64(array):
    """The checksum `clrun run` prints for an output: XXH64 (seed 0) of its bytes, 16 hex digits."""
    return "%016x" % _xxhash.XXH64(array.ctypes.data, array.nbytes, 0)


_opencl = ctypes.CDLL(ctypes.util.find_library("OpenCL") or "libOpenCL.so.1")
_opencl.clGetContextInfo.restype = ctypes.c_int32
_opencl.clGetContextInfo.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t,
                                     ctypes.c_void_p, ctypes.c_void_p]
CL_CONTEXT_REFERENCE_COUNT = 0x1080


def cl_reference_count(ctx):
    """The OpenCL reference count of the context's cl_context: every live cl_mem, queue and
    program holds one, so a leak of any of them shows here."""
    count = ctypes.c_uint32()
    status = _opencl.clGetContextInfo(ctx.cl_context, CL_CONTEXT_REFERENCE_COUNT,
                                      ctypes.sizeof(count), ctypes.byref(count), None)
    assert status == 0, "clGetContextInfo failed: %d" % status
    return count.value


class GraphFiles(unittest.TestCase):
    """A test case with a private directory for .graph files written by the test."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="clrun-pytest-")
        self.addCleanup(self._dir.cleanup)

    def graph(self, text, name="g.graph"):
        path = os.path.join(self._dir.name, name)
        with open(path, "w") as out:
            out.write(text)
        return path

    def path(self, name):
        return os.path.join(self._dir.name, name)


# ---- ONNX models written by hand (no onnx module needed): the protobuf fields of onnx.proto --

def _varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number, value):
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    if isinstance(value, str):
        value = value.encode()
    return _varint(number << 3 | 2) + _varint(len(value)) + value


ONNX_FLOAT, ONNX_INT32, ONNX_INT64 = 1, 6, 7


def onnx_value(name, elem, dims):
    """A ValueInfoProto: dims are ints (fixed), strings (symbolic) or None (unknown); None for
    no shape at all."""
    tensor = _field(1, elem)
    if dims is not None:
        tensor += _field(2, b"".join(_field(1, b"" if d is None else _field(1, d)
                                            if isinstance(d, int) else _field(2, d))
                                     for d in dims))
    return _field(1, name) + _field(2, _field(1, tensor))


def onnx_node(op, inputs, outputs, name=""):
    return (b"".join(_field(1, i) for i in inputs) + b"".join(_field(2, o) for o in outputs) +
            _field(3, name or outputs[0]) + _field(4, op))


def onnx_model(nodes, inputs, outputs, name="g", opset=13):
    """The bytes of an ONNX model: nodes from onnx_node, inputs and outputs from onnx_value."""
    graph = (b"".join(_field(1, n) for n in nodes) + _field(2, name) +
             b"".join(_field(11, i) for i in inputs) + b"".join(_field(12, o) for o in outputs))
    return (_field(1, 8) + _field(8, _field(1, "") + _field(2, opset)) + _field(7, graph))
