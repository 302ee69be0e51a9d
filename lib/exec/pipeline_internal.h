/* The pipeline's internal hooks, for the tests. */
#ifndef CLRUN_EXEC_PIPELINE_INTERNAL_H
#define CLRUN_EXEC_PIPELINE_INTERNAL_H

#include <stdint.h>

#include <clrun/pipeline.h>

/* Makes stage `stage` fail (CLRUN_ERROR_OPENCL, "injected failure") when it starts
 * micro-batch `micro_batch` of a later run, as a device failing mid-stream would; -1 turns it
 * off. For tests of the stop and the message. */
void clrun__pipeline_fail_at(clrun_pipeline *pipeline, int32_t stage, int32_t micro_batch);

#endif
