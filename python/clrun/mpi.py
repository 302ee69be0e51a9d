"""Data-parallel training over MPI: one process (rank) per device, each training on its share
of every global batch, the gradients all-reduced between the backward pass and the update
(libclrun-mpi, include/clrun/mpi.h, through ctypes; docs/python.md).

    import clrun, clrun.mpi

    dp = clrun.mpi.DataParallel()                 # MPI_COMM_WORLD, or comm=an mpi4py communicator
    first, rows = dp.share(256)                   # this rank's rows of each global batch of 256
    with clrun.Context() as ctx:
        step = ctx.train(model_with_batch_rows, "xent:logits", clrun.Adam(),
                         data_parallel=dp)
        for x, y in batches_of_256:
            step(x=x[first:first + rows], labels=y[first:first + rows])

Run under ``mpirun -np N python3 script.py``. Every rank ends with the parameters one process
gets at the same global batch, within rounding. mpi4py is not needed: a communicator is taken
duck-typed, by its ``py2f()`` (its Fortran handle); without one the world's is used, and MPI is
initialised here when nothing initialised it (and then finalised when the last
:class:`DataParallel`, whichever, closes). libclrun-mpi is built only when clrun was configured with MPI:
without it, :class:`DataParallel` raises :class:`clrun.UnsupportedError`.
"""

import ctypes
import ctypes.util
import os
import threading
import weakref

from . import _lib
from .errors import BusyError, InvalidArgumentError, UnsupportedError, error, type_error, \
    INVALID_ARGUMENT, STATUSES, UNSUPPORTED

__all__ = ["DataParallel", "available"]

_loaded = None
_load_lock = threading.Lock()


def _candidates():
    explicit = os.environ.get("CLRUN_MPI_LIBRARY")
    if explicit:
        yield explicit
        return
    # beside the libclrun this binding loaded (the build tree's .libs, or make install's libdir)
    here = getattr(_lib.lib, "_name", None)
    if here and os.path.dirname(here):
        yield os.path.join(os.path.dirname(here), "libclrun-mpi.so.0")
    found = ctypes.util.find_library("clrun-mpi")
    if found:
        yield found
    yield "libclrun-mpi.so.0"


def _library():
    """libclrun-mpi with its prototypes, loaded once; UnsupportedError when it is absent."""
    global _loaded
    with _load_lock:
        if _loaded is not None:
            return _loaded
        tried = []
        lib = None
        for path in _candidates():
            try:
                # global: Open MPI's plugins, loaded by MPI_Init, look up libmpi's symbols
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                break
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
        if lib is None:
            raise UnsupportedError(UNSUPPORTED, "clrun.mpi: libclrun-mpi is not there (tried " +
                                   "; ".join(tried) + "): clrun was built without MPI; "
                                   "apt-get install libopenmpi-dev openmpi-bin, then "
                                   "./configure --with-mpi, or set CLRUN_MPI_LIBRARY")

        def proto(name, restype, *argtypes):
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = list(argtypes)
            return function
        p = ctypes.c_void_p
        pp = ctypes.POINTER(ctypes.c_void_p)
        i64p = ctypes.POINTER(ctypes.c_int64)
        lib.create = proto("clrun_mpi_create", ctypes.c_int, p, pp)
        lib.create_fortran = proto("clrun_mpi_create_fortran", ctypes.c_int, ctypes.c_int, pp)
        lib.destroy = proto("clrun_mpi_destroy", None, p)
        lib.last_error = proto("clrun_mpi_last_error", ctypes.c_char_p)
        lib.rank = proto("clrun_mpi_rank", ctypes.c_int, p)
        lib.size = proto("clrun_mpi_size", ctypes.c_int, p)
        lib.share = proto("clrun_mpi_share", ctypes.c_int, p, ctypes.c_int64, i64p, i64p)
        lib.weight = proto("clrun_mpi_weight", ctypes.c_double, p)
        lib.set_timeout = proto("clrun_mpi_set_timeout", ctypes.c_int, p, ctypes.c_double)
        lib.timeout = proto("clrun_mpi_timeout", ctypes.c_double, p)
        lib.train_options = proto("clrun_mpi_train_options", ctypes.c_int, p,
                                  ctypes.POINTER(_lib.TrainOptions), ctypes.c_uint64)
        lib.sum = proto("clrun_mpi_sum", ctypes.c_int, p, ctypes.POINTER(ctypes.c_double),
                        ctypes.c_int, ctypes.c_char_p)
        lib.stats_get = proto("clrun_mpi_stats_get", None, p, ctypes.POINTER(_Stats))
        lib.abort = proto("clrun_mpi_abort", None, p, ctypes.c_int)
        lib.broken = proto("clrun_mpi_broken", ctypes.c_bool, p)
        _loaded = lib
        return lib


class _Stats(ctypes.Structure):
    """clrun_mpi_stats (mpi.h)."""
    _fields_ = [("reduces", ctypes.c_uint64), ("reduce_s", ctypes.c_double),
                ("last_reduce_s", ctypes.c_double)]


def available():
    """Whether libclrun-mpi can be loaded (clrun was built with MPI)."""
    try:
        _library()
        return True
    except UnsupportedError:
        return False


def _check(lib, status):
    if status:
        raise error(status, _lib.text(lib.last_error()))


class _Handle:
    """The C handle, destroyed by close() or at exit (after the train steps that use it)."""

    def __init__(self, lib, pointer):
        self.lib = lib
        self.pointer = pointer
        self.was_broken = False

    def broken(self):
        """Whether a collective failed on the handle (remembered after close)."""
        if self.pointer is not None:
            self.was_broken = bool(self.lib.broken(self.pointer))
        return self.was_broken

    def close(self):
        if self.pointer is not None:
            self.broken()
            self.lib.destroy(self.pointer)
            self.pointer = None


class DataParallel:
    """A data-parallel group over an MPI communicator (clrun_mpi_create).

    Args:
        comm: None or ``"world"`` for MPI_COMM_WORLD; an mpi4py communicator (or any object
            whose ``py2f()`` gives a communicator's Fortran handle); or that handle, an int.
            The communicator is duplicated: clrun's messages never mix with the caller's.
        timeout: seconds a collective may wait for the other ranks before they are probed; a
            rank that does not answer makes the step raise :class:`clrun.InputOutputError`
            naming it (then call :meth:`abort`: the other ranks may be waiting). Default 60.

    Pass it to :meth:`clrun.Context.train` as ``data_parallel=``; feed each step this rank's
    rows of the global batch (:meth:`share`). The trainer keeps it alive; :meth:`close` it (or
    let the interpreter's exit do it) after the train steps.
    """

    def __init__(self, comm=None, timeout=None):
        lib = _library()
        handle = ctypes.c_void_p()
        if comm is None or (isinstance(comm, str) and comm == "world"):
            status = lib.create(None, ctypes.byref(handle))
        else:
            if isinstance(comm, bool):
                raise type_error("comm is None, 'world', an mpi4py communicator or a Fortran "
                                 "handle (int), not %r" % (comm,))
            if isinstance(comm, int):
                fortran = comm
            elif callable(getattr(comm, "py2f", None)):
                fortran = comm.py2f()
                if isinstance(fortran, bool) or not isinstance(fortran, int):
                    raise type_error("comm.py2f() gave %r, not a Fortran handle (int)" % (fortran,))
            else:
                raise type_error("comm is None, 'world', an mpi4py communicator (with py2f()) or a "
                                 "Fortran handle (int), not %r" % (comm,))
            if not -2**31 <= fortran < 2**31:
                raise InvalidArgumentError(INVALID_ARGUMENT, "comm: Fortran handle %d is out of "
                                           "range" % fortran)
            status = lib.create_fortran(fortran, ctypes.byref(handle))
        _check(lib, status)
        self._lib = lib
        self._handle = _Handle(lib, handle.value)
        self._finalizer = weakref.finalize(self, _Handle.close, self._handle)
        self.global_batch = None
        self._steps = weakref.WeakSet()  # the train steps whose hooks use the handle
        if timeout is not None:
            self.timeout = timeout

    def _pointer(self):
        if self._handle.pointer is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "this clrun.mpi.DataParallel is closed")
        return self._handle.pointer

    @property
    def rank(self):
        """This process's rank in the communicator."""
        return self._lib.rank(self._pointer())

    @property
    def size(self):
        """The ranks in the communicator."""
        return self._lib.size(self._pointer())

    @property
    def timeout(self):
        """Seconds a collective may wait before the other ranks are probed."""
        return self._lib.timeout(self._pointer())

    @timeout.setter
    def timeout(self, seconds):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise type_error("timeout is seconds (a number), not %r" % (seconds,))
        _check(self._lib, self._lib.set_timeout(self._pointer(), float(seconds)))

    @property
    def weight(self):
        """The factor this rank's gradients are scaled by: its rows over the global batch's."""
        return self._lib.weight(self._pointer())

    def share(self, global_batch):
        """This rank's rows of every global batch of ``global_batch`` rows, as ``(first, rows)``:
        floor(B / N) rows, one more on the first B mod N ranks, in rank order (clrun train's
        split). Sets the rank's weight. clrun.InvalidArgumentError when B is less than the
        ranks."""
        if isinstance(global_batch, bool) or not isinstance(global_batch, int):
            raise type_error("global_batch is a number of rows (int), not %r" % (global_batch,))
        first, rows = ctypes.c_int64(), ctypes.c_int64()
        _check(self._lib, self._lib.share(self._pointer(), global_batch, ctypes.byref(first),
                                          ctypes.byref(rows)))
        self.global_batch = global_batch
        return first.value, rows.value

    def sum(self, values):
        """The element-wise sum over the ranks of a list of floats (a collective: every rank
        calls it), under the timeout; a list of floats."""
        values = [float(v) for v in values]
        buf = (ctypes.c_double * max(1, len(values)))(*values)
        _check(self._lib, self._lib.sum(self._pointer(), buf, len(values), b"clrun.mpi sum"))
        return list(buf[:len(values)])

    def stats(self):
        """The gradient reductions so far: ``reduces``, ``reduce_s`` (their wall time in all)
        and ``last_reduce_s``."""
        st = _Stats()
        self._lib.stats_get(self._pointer(), ctypes.byref(st))
        return {"reduces": st.reduces, "reduce_s": st.reduce_s, "last_reduce_s": st.last_reduce_s}

    @property
    def broken(self):
        """Whether a collective failed or timed out (a step raised
        :class:`clrun.InputOutputError`): then only :meth:`abort` is safe."""
        return self._handle.broken()

    def abort(self, code=1):
        """Ends the whole job (MPI_Abort): after a step failed on a collective, or an error of
        this rank's that the others would wait on. Does not return while MPI runs."""
        self._lib.abort(self._handle.pointer, int(code))

    def _fill(self, options, bucket_bytes):
        """Sets a clrun_train_options' hooks to this group's all-reduce (the step made with them
        registers itself with _adopt)."""
        if self.global_batch is None:
            raise InvalidArgumentError(INVALID_ARGUMENT, "data_parallel: call share(global_batch) "
                                       "first: it sets this rank's share of the gradient")
        _check(self._lib, self._lib.train_options(self._pointer(), _lib.byref(options),
                                                  bucket_bytes))

    def _adopt(self, step):
        self._steps.add(step)

    def close(self):
        """Frees the duplicate communicator (collective), finalising MPI when clrun
        initialised it and no other group is left. The train steps made with it must be closed first:
        clrun.BusyError otherwise."""
        open_steps = [s for s in self._steps if not s.closed]
        if open_steps:
            busy = [code for code, name in STATUSES.items() if name == "CLRUN_ERROR_BUSY"][0]
            raise BusyError(busy, "clrun.mpi.DataParallel.close: %d train step(s) made with it "
                            "are open (their hooks use it); close them first" % len(open_steps))
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._handle.pointer is None:
            return "clrun.mpi.DataParallel(closed)"
        return "clrun.mpi.DataParallel(rank=%d, size=%d)" % (self.rank, self.size)
