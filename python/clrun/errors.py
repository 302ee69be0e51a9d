"""Errors: every failing clrun status raises a subclass of :class:`Error`.

Each exception carries the status code (``status``), its symbolic name (``name``, e.g.
``"CLRUN_ERROR_OUT_OF_MEMORY"``) and the library's message for that failure (``message``: what
was asked for, what the pool held, the OpenCL error name, the tensor). ``str(error)`` is
``"NAME: message"``.

Where a Python exception type means the same thing, the class derives from it too, so
``except MemoryError`` catches :class:`OutOfMemoryError` and ``except ValueError`` catches
:class:`InvalidGraphError`.
"""

from . import _lib


class Error(Exception):
    """A clrun call failed.

    Attributes:
        status: the clrun_status code (negative int).
        name: its symbolic name, e.g. ``"CLRUN_ERROR_DONATED"``.
        message: the library's message for this failure.
    """

    def __init__(self, status, message):
        self.status = status
        self.name = _lib.text(_lib.status_name(status))
        self.message = message or _lib.text(_lib.strerror(status))
        super().__init__("%s: %s" % (self.name, self.message))

    def __reduce__(self):
        return (type(self), (self.status, self.message))


class InvalidArgumentError(Error, ValueError):
    """CLRUN_ERROR_INVALID_ARGUMENT: an argument the call cannot take (wrong input name, shape,
    dtype, a closed context)."""


class InvalidOptionError(Error, ValueError):
    """CLRUN_ERROR_INVALID_OPTION: a CLRUN_* variable or an option has an invalid value."""


class NoPlatformError(Error):
    """CLRUN_ERROR_NO_PLATFORM: no OpenCL platform is installed."""


class NoDeviceError(Error):
    """CLRUN_ERROR_NO_DEVICE: no device matches the selection (the message lists those that
    exist)."""


class OpenCLError(Error):
    """CLRUN_ERROR_OPENCL: an OpenCL call failed (the message names the CL error)."""


class OutOfMemoryError(Error, MemoryError):
    """CLRUN_ERROR_OUT_OF_MEMORY: the pool cannot hold what was asked for (the message says what
    was asked, what is in use, reserved and free, and the limit)."""


class OutOfHostMemoryError(Error, MemoryError):
    """CLRUN_ERROR_OUT_OF_HOST_MEMORY: host memory ran out."""


class InvalidSizeError(Error, ValueError):
    """CLRUN_ERROR_INVALID_SIZE: a size of 0, or above the device's maximum allocation."""


class InvalidAlignmentError(Error, ValueError):
    """CLRUN_ERROR_INVALID_ALIGNMENT: an alignment that is not a power of two."""


class InvalidFreeError(Error):
    """CLRUN_ERROR_INVALID_FREE: a free of a block that is not live."""


class BuildFailedError(Error):
    """CLRUN_ERROR_BUILD_FAILED: an OpenCL program did not build (the message has the log)."""


class UnsupportedError(Error):
    """CLRUN_ERROR_UNSUPPORTED: not supported by this device or this build of clrun (for example
    ONNX import in a library without it)."""


class UnsupportedOpError(UnsupportedError):
    """CLRUN_ERROR_UNKNOWN_KERNEL: an operation clrun does not have."""


class UnknownAllocatorError(Error, ValueError):
    """CLRUN_ERROR_UNKNOWN_ALLOCATOR: no allocator strategy has that name."""


class InputOutputError(Error, OSError):
    """CLRUN_ERROR_IO: a file could not be read or written."""


class ParseError(Error, ValueError):
    """CLRUN_ERROR_PARSE: a malformed file ("FILE:LINE:COL: message")."""


class InvalidGraphError(Error, ValueError):
    """CLRUN_ERROR_INVALID_GRAPH: a graph clrun refuses (names, cycles, shapes, an op's reason)."""


class DonatedError(Error):
    """CLRUN_ERROR_DONATED: a buffer was donated to a run and can no longer be used."""


class GuardError(Error):
    """CLRUN_ERROR_GUARD: guard mode found a red zone overwritten."""


class BusyError(Error):
    """CLRUN_ERROR_BUSY: the resource is still in use."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """CLRUN_ERROR_INVALID_ARGUMENT raised by the binding for a value of the wrong type (an
    int32 array for a float32 input, a positional array): also a TypeError, as onnxruntime and
    numpy raise."""


class UnusedDonationWarning(UserWarning):
    """A model donates inputs that no output can take (JAX: "Some donated buffers were not
    usable"): their memory is freed after their last use, never reused in place. Load with
    strict_donation=True to make it an error."""


# The library's statuses by name; the codes come from the library itself (clrun_status_name),
# so a status added to CLRUN_STATUS_TABLE needs no number copied here (without a class of its
# own it raises Error).
_BY_NAME = {
    "CLRUN_ERROR_INVALID_ARGUMENT": InvalidArgumentError,
    "CLRUN_ERROR_INVALID_OPTION": InvalidOptionError,
    "CLRUN_ERROR_NO_PLATFORM": NoPlatformError,
    "CLRUN_ERROR_NO_DEVICE": NoDeviceError,
    "CLRUN_ERROR_OPENCL": OpenCLError,
    "CLRUN_ERROR_OUT_OF_MEMORY": OutOfMemoryError,
    "CLRUN_ERROR_OUT_OF_HOST_MEMORY": OutOfHostMemoryError,
    "CLRUN_ERROR_INVALID_SIZE": InvalidSizeError,
    "CLRUN_ERROR_INVALID_ALIGNMENT": InvalidAlignmentError,
    "CLRUN_ERROR_INVALID_FREE": InvalidFreeError,
    "CLRUN_ERROR_BUILD_FAILED": BuildFailedError,
    "CLRUN_ERROR_UNKNOWN_KERNEL": UnsupportedOpError,
    "CLRUN_ERROR_UNKNOWN_ALLOCATOR": UnknownAllocatorError,
    "CLRUN_ERROR_IO": InputOutputError,
    "CLRUN_ERROR_PARSE": ParseError,
    "CLRUN_ERROR_INVALID_GRAPH": InvalidGraphError,
    "CLRUN_ERROR_DONATED": DonatedError,
    "CLRUN_ERROR_GUARD": GuardError,
    "CLRUN_ERROR_UNSUPPORTED": UnsupportedError,
    "CLRUN_ERROR_BUSY": BusyError,
}
STATUSES = _lib.statuses()  # {code: "CLRUN_ERROR_..."}
_CODES = {name: code for code, name in STATUSES.items()}
_BY_STATUS = {code: _BY_NAME.get(name, Error) for code, name in STATUSES.items()}

INVALID_ARGUMENT = _CODES["CLRUN_ERROR_INVALID_ARGUMENT"]
DONATED = _CODES["CLRUN_ERROR_DONATED"]
UNSUPPORTED = _CODES["CLRUN_ERROR_UNSUPPORTED"]
IO = _CODES["CLRUN_ERROR_IO"]


def type_error(message):
    """The binding's error for a value of the wrong type: an InvalidArgumentError that is also a
    TypeError."""
    return InvalidArgumentTypeError(INVALID_ARGUMENT, message)


def error(status, message=None):
    """The exception for a status, with the given message or the library's sentence."""
    return _BY_STATUS.get(status, Error)(status, message)


def check(status, context=None, message=None):
    """Raises the exception for a failing status; the message is the library's last error on
    `context` (a C context pointer, or None for calls without one) unless one is given."""
    if status == 0:
        return
    if message is None:
        message = _lib.text(_lib.last_error(context))
    raise error(status, message)
