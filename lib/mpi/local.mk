# mpi: libclrun-mpi, data-parallel training over MPI (<clrun/mpi.h>): the reduce hooks of
# <clrun/train.h> as MPI all-reduces polled under a timeout. A library of its own, built and
# installed only when configure found MPI, so that libclrun stays free of it; above train (it
# fills clrun_train_options), below the CLI, which uses it for clrun train under mpirun.
if HAVE_MPI
lib_LTLIBRARIES += libclrun-mpi.la
libclrun_mpi_la_SOURCES = lib/mpi/data_parallel.c
libclrun_mpi_la_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
libclrun_mpi_la_LIBADD = libclrun.la $(MPI_LIBS)
libclrun_mpi_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(CLRUN_LT_VERSION) \
	-export-symbols-regex '^clrun_mpi_[a-z]'
EXTRA_libclrun_mpi_la_DEPENDENCIES = $(top_builddir)/config.status
clruninclude_HEADERS += include/clrun/mpi.h
pkgconfig_DATA += clrun-mpi.pc

# The C API under mpirun -np 2 and 3 against one process (skipped without MPI).
check_PROGRAMS += tests/test_mpi
tests_test_mpi_SOURCES = tests/test_mpi.c
tests_test_mpi_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
tests_test_mpi_LDADD = libclrun-mpi.la libclrun.la $(OPENCL_LIBS) $(MPI_LIBS)
endif
TESTS += tests/mpi_train.sh
EXTRA_DIST += tests/mpi_train.sh tests/python/mpi_train.py
