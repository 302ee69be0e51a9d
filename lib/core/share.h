/* The one split of a batch into shares (devices of one process, MPI ranks, --deterministic's
 * chunks): share k of `batch` rows cut into `count` shares is rows [first, first + rows),
 * batch / count rows each, one more on the first batch % count shares. Pure arithmetic; the
 * public faces are clrun_train_parallel_share (<clrun/train_parallel.h>) and the data-parallel
 * inference of <clrun/run_parallel.h>, both of which cut here. */
#ifndef CLRUN_LIB_CORE_SHARE_H
#define CLRUN_LIB_CORE_SHARE_H

#include <stdint.h>

#include <clrun/status.h>

/* Share k of `batch` rows over `count` shares. first or rows may be NULL. Errors:
 * CLRUN_ERROR_INVALID_ARGUMENT for count < 1, k outside [0, count) or batch < count (a share
 * without a row), with this thread's error message saying which ("batch share: ..."); the
 * outputs are then unchanged. */
clrun_status clrun__batch_share(int64_t batch, int32_t count, int32_t k, int64_t *first,
                                int64_t *rows);

#endif
