"""clrun from Python: OpenCL graphs with pooled, reusing device memory, numpy in and out.

    import numpy as np
    import clrun

    with clrun.Context(allocator="slab") as ctx:
        model = ctx.load("examples/mlp.graph", mode="planned")
        y = model(x=np.ones((64, 784), np.float32))["y"]
        print(ctx.memory_stats()["in_use_peak"], model.stats()["peak_over_lower_bound"])

The package is a thin layer over libclrun's public C API (ctypes, no compiled extension):
:func:`devices` lists OpenCL devices; a :class:`Context` is one device with its memory pool;
:meth:`Context.load` gives a :class:`Model`, run on numpy arrays or on :class:`DeviceArray`
values uploaded once with :meth:`Context.array`; :meth:`Context.train` gives a model's
:class:`TrainStep` (loss, gradients and an :class:`SGD`, :class:`Adam` or :class:`AdamW` update
on the device); failures raise subclasses of :class:`Error` carrying the library's status name
and message. See docs/python.md.
"""

from . import _lib
from ._context import Context, Device, DeviceArray, devices
from ._model import Model, TensorInfo
from ._pipeline import Pipeline, RunInfo, StageInfo
from ._data_parallel import DataParallel, ShareInfo
from ._train import SGD, Adam, AdamW, FeedInfo, Optimizer, TrainStep
from .errors import (Error, InvalidArgumentError, InvalidOptionError, NoPlatformError,
                     NoDeviceError, OpenCLError, OutOfMemoryError, OutOfHostMemoryError,
                     InvalidSizeError, InvalidAlignmentError, InvalidFreeError, BuildFailedError,
                     UnsupportedError, UnsupportedOpError, UnknownAllocatorError,
                     InputOutputError, ParseError, InvalidGraphError, DonatedError, GuardError,
                     BusyError, InvalidArgumentTypeError, UnusedDonationWarning)

__version__ = _lib.text(_lib.version())

__all__ = [
    "devices", "Context", "Device", "DeviceArray", "Model", "TensorInfo", "Pipeline", "RunInfo", "StageInfo",
    "DataParallel", "ShareInfo",
    "TrainStep", "FeedInfo", "Optimizer", "SGD", "Adam", "AdamW",
    "Error", "InvalidArgumentError", "InvalidOptionError", "NoPlatformError", "NoDeviceError",
    "OpenCLError", "OutOfMemoryError", "OutOfHostMemoryError", "InvalidSizeError",
    "InvalidAlignmentError", "InvalidFreeError", "BuildFailedError", "UnsupportedError",
    "UnsupportedOpError", "UnknownAllocatorError", "InputOutputError", "ParseError",
    "InvalidGraphError", "DonatedError", "GuardError", "BusyError", "InvalidArgumentTypeError",
    "UnusedDonationWarning",
]
