"""clrun.mpi under mpirun -np N (tests/mpi_train.sh, through tests/python/run.sh): an MLP trained
data-parallel through the Python package, each rank on its share of every global batch of 32
rows (11, 11 and 10 on 3 ranks), ends with the parameters of one process at the same global
batch (trained by each rank alone) within 1e-6 of each tensor's largest value, the same bits
on every rank; over MPI_COMM_WORLD (comm=None), a communicator given duck-typed by py2f(), in
buckets and in one all-reduce. Bad input raises clear errors. Closing a step whose
DataParallel broke leaves its native trainer allocated (MPI may still write into it). With MPI_TRAIN_MODE=absent (and
CLRUN_MPI_LIBRARY naming no file, run alone): the error when libclrun-mpi is not there."""

import os
import sys
import tempfile
import zlib

import numpy as np

import clrun
import clrun.mpi

IN, HIDDEN, CLASSES, GLOBAL, ROWS = 16, 24, 5, 32, 96
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: %s" % what, file=sys.stderr)


def expect_error(kind, text, fn, what):
    try:
        fn()
    except kind as e:
        check(text in str(e), "%s: %r lacks %r" % (what, str(e), text))
        return
    except Exception as e:  # noqa: BLE001 - reported as a failure
        check(False, "%s: %s(%s), not %s" % (what, type(e).__name__, e, kind.__name__))
        return
    check(False, "%s: no error" % what)


if os.environ.get("MPI_TRAIN_MODE") == "absent":
    check(not clrun.mpi.available(), "available() with no libclrun-mpi")
    expect_error(clrun.UnsupportedError, "clrun was built without MPI", clrun.mpi.DataParallel,
                 "DataParallel() without libclrun-mpi")
    sys.exit(1 if failures else 0)


def graph(path, rows):
    with open(path, "w") as f:
        f.write("graph mpi_mlp\n"
                "input x: f32[%d, %d]\n"
                "const w1: f32[%d, %d] uniform(-0.25, 0.25) seed=1\n"
                "const b1: f32[%d] uniform(-0.25, 0.25) seed=2\n"
                "const w2: f32[%d, %d] uniform(-0.2, 0.2) seed=3\n"
                "const b2: f32[%d] uniform(-0.2, 0.2) seed=4\n"
                "node h: f32[%d, %d] = matmul(x, w1, b1)\n"
                "node a: f32[%d, %d] = relu(h)\n"
                "node logits: f32[%d, %d] = matmul(a, w2, b2)\n"
                "output logits\n" % (rows, IN, IN, HIDDEN, HIDDEN, HIDDEN, CLASSES, CLASSES,
                                     rows, HIDDEN, rows, HIDDEN, rows, CLASSES))
    return path


class FakeComm:
    """What mpi4py's communicators offer clrun: py2f(), the Fortran handle."""

    def __init__(self, handle):
        self.handle = handle

    def py2f(self):
        return self.handle


rs = np.random.RandomState(0)
x = rs.uniform(-0.5, 0.5, (ROWS, IN)).astype(np.float32)
y = rs.randint(0, CLASSES, ROWS).astype(np.int64)
steps = 6 if 0 < int(os.environ.get("CLRUN_TEST_ROUNDS", "0") or 0) < 12 else 12

world = clrun.mpi.DataParallel(timeout=20)
rank, size = world.rank, world.size
check(world.timeout == 20, "timeout %r" % world.timeout)
# Open MPI's MPI_COMM_WORLD has the Fortran handle 0: a communicator handed in as mpi4py would
given = clrun.mpi.DataParallel(comm=FakeComm(0))
check(given.size == size and given.rank == rank, "FakeComm(0): rank %d of %d" % (given.rank,
                                                                                 given.size))

# bad input
expect_error(clrun.InvalidArgumentError, "less than a row for each of the %d ranks" % size,
             lambda: world.share(size - 1), "share(%d) on %d ranks" % (size - 1, size))
expect_error(TypeError, "py2f", lambda: clrun.mpi.DataParallel(comm=object()), "comm=object()")
expect_error(clrun.InvalidArgumentError, "names no communicator",
             lambda: clrun.mpi.DataParallel(comm=FakeComm(1 << 20)), "comm of no communicator")
expect_error(clrun.InvalidArgumentError, "seconds > 0", lambda: setattr(world, "timeout", 0),
             "timeout 0")

with tempfile.TemporaryDirectory() as tmp, clrun.Context() as ctx:
    expect_error(clrun.InvalidArgumentError, "share(global_batch)",
                 lambda: ctx.train(graph(tmp + "/early.graph", 4), "xent:logits",
                                   data_parallel=clrun.mpi.DataParallel()),
                 "data_parallel before share()")
    one_path = graph(tmp + "/one.graph", GLOBAL)
    for dp, buckets, opt in [(world, "512", clrun.Adam(lr=0.01)),
                             (given, 0, clrun.SGD(lr=0.1, momentum=0.9))]:
        what = "%s, bucket_bytes=%r, %s" % ("world" if dp is world else "py2f", buckets,
                                            type(opt).__name__)
        first, rows = dp.share(GLOBAL)
        check(rows == GLOBAL // size + (rank < GLOBAL % size), "%s: %d rows" % (what, rows))
        alone = ctx.train(one_path, "xent:logits", opt)
        dist = ctx.train(graph(tmp + "/rank.graph", rows), "xent:logits", opt, data_parallel=dp,
                         bucket_bytes=buckets)
        for k in range(steps):
            base = (k % (ROWS // GLOBAL)) * GLOBAL
            alone(x=x[base:base + GLOBAL], labels=y[base:base + GLOBAL])
            dist(x=x[base + first:base + first + rows], labels=y[base + first:base + first + rows])
        a, d = alone.params(), dist.params()
        worst = max(float(np.abs(d[k].astype(np.float64) - a[k]).max() / np.abs(a[k]).max())
                    for k in a)
        check(worst <= 1e-6, "%s: %d ranks differ from one process by %.3g" % (what, size, worst))
        # the same bits everywhere: the hashes' sum and sum of squares are those of rank 0's
        h = float(zlib.crc32(b"".join(d[k].tobytes() for k in sorted(d))) & 0xFFFFFF)
        total, squares = dp.sum([h, h * h])
        check(total == size * h and squares == size * h * h, "%s: the ranks' parameters differ"
              % what)
        st = dp.stats()
        check(not dp.broken, "%s: broken after steps that succeeded" % what)
        check(size == 1 or st["reduces"] >= steps, "%s: %r" % (what, st))
        if rank == 0:
            print("%s: %d ranks, %d steps: %.3g of a tensor's largest from one process"
                  % (what, size, steps, worst))
        alone.close()
        expect_error(clrun.BusyError, "close them first", dp.close, "close() with a step open")
        dist.close()

    # a step whose DataParallel broke is closed without freeing its native trainer (a collective
    # given up may still write into its gradients); one whose DataParallel is sound is freed
    import clrun._train as train_module

    class Handle:
        def __init__(self, broken):
            self.is_broken = broken

        def broken(self):
            return self.is_broken

    real_destroy, destroyed = train_module._lib.train_destroy, []
    train_module._lib.train_destroy = destroyed.append
    try:
        for broken in (True, False):
            step = ctx.train(graph(tmp + "/rank.graph", rows), "xent:logits", clrun.SGD(),
                             data_parallel=world)
            pointer = step._state.pointer
            step._state.data_parallel = Handle(broken)
            step.close()
            check(step.closed and destroyed == ([] if broken else [pointer]),
                  "closing a step whose DataParallel is %s: destroyed %r" %
                  ("broken" if broken else "sound", destroyed))
            del destroyed[:]
            real_destroy(pointer)
    finally:
        train_module._lib.train_destroy = real_destroy
given.close()
world.close()
sys.exit(1 if failures else 0)
