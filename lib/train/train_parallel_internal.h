/* Internal hooks of the data-parallel trainer (lib/train/train_parallel.c), for tests. */
#ifndef CLRUN_TRAIN_PARALLEL_INTERNAL_H
#define CLRUN_TRAIN_PARALLEL_INTERNAL_H

#include <stdint.h>

#include <clrun/train_parallel.h>

/* Makes device share `k` fail (CLRUN_ERROR_OPENCL, "injected failure") when it hands in bucket
 * `bucket` of a later step (with one reduction after the backward passes: bucket 0), as a
 * device failing mid-step would, after handing in the buckets before it; -1 turns it off. Set
 * between steps only. For tests of the give-up, the drain and the message. */
void clrun__train_parallel_fail_at(clrun_train_parallel *parallel, int32_t k, int32_t bucket);

#endif
