/* The data-parallel runner's internal hooks, for the tests. */
#ifndef CLRUN_EXEC_RUN_PARALLEL_INTERNAL_H
#define CLRUN_EXEC_RUN_PARALLEL_INTERNAL_H

#include <stdint.h>

#include <clrun/run_parallel.h>

/* Makes device k (the k-th of the runner's devices) fail every later run with CLRUN_ERROR_OPENCL
 * and "injected failure", after its inputs are copied to its buffers and before its executor
 * runs, as a device failing mid-run would, while the others run; -1 turns it off. For tests of
 * the message, the join and the release of the buffers. */
void clrun__run_parallel_fail_at(clrun_run_parallel *parallel, int32_t k);

#endif
