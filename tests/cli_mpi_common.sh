# Sourced by the tests under mpirun (after cli_common.sh): skips (exit 77) when configure found
# no MPI, mpirun is missing, or Python lacks onnx or scikit-learn (unless CLRUN_MPI_NO_PYTHON=yes);
# sets the environment for ranks on this one machine; defines mpi N ARGS..., mpirun with N ranks
# in it.
if [ "${HAVE_MPI:-no}" != yes ]; then
    echo "SKIP: clrun was configured without MPI (apt-get install libopenmpi-dev openmpi-bin)"
    exit 77
fi
# CLRUN_MPI_NO_PYTHON=yes: a test whose data needs neither onnx nor scikit-learn.
if [ "${CLRUN_MPI_NO_PYTHON:-no}" != yes ]; then
    need_onnx_python
    if ! "$PYTHON" -c 'import sklearn' >/dev/null 2>&1; then
        echo "SKIP: $PYTHON lacks scikit-learn (apt-get install python3-sklearn)"
        exit 77
    fi
fi
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "SKIP: no $MPIRUN (apt-get install openmpi-bin)"
    exit 77
fi
# One POCL thread per rank: the ranks are the parallelism (CI has 2 cores).
# One machine: shared memory only (no network to probe), without the kernel's cross-memory
# attach, which containers often forbid (ptrace).
POCL_DEVICES=pthread POCL_MAX_PTHREAD_COUNT=1 OMP_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export POCL_DEVICES POCL_MAX_PTHREAD_COUNT OMP_NUM_THREADS OMPI_MCA_rmaps_base_oversubscribe \
    OMPI_MCA_btl OMPI_MCA_btl_vader_single_copy_mechanism
# Under AddressSanitizer (CI's clang build), Open MPI's own allocations that live until exit are
# suppressed by library name (tests/lsan.supp): that takes its plugins kept loaded and the slow
# unwinder, which reaches their frames (the fast one stops at the first frame without a frame
# pointer). Both are no-ops in other builds.
OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
export OMPI_MCA_mca_base_component_disable_dlclose PMIX_MCA_mca_base_component_disable_dlclose
mpi() {
    n=$1
    shift
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
        "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" -x POCL_DEVICES -x POCL_MAX_PTHREAD_COUNT \
        -x OMP_NUM_THREADS -x OMPI_MCA_mca_base_component_disable_dlclose \
        -x PMIX_MCA_mca_base_component_disable_dlclose -x ASAN_OPTIONS "$@"
}
