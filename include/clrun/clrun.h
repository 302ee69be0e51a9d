/* clrun: a vendor-neutral runtime over OpenCL with pooled, reusing device memory.
 * The umbrella header: include this one. */
#ifndef CLRUN_H
#define CLRUN_H

#define CLRUN_VERSION_STRING "0.1.0"

#include <clrun/status.h>
#include <clrun/log.h>
#include <clrun/context.h>
#include <clrun/program.h>
#include <clrun/memory.h>
#include <clrun/graph.h>
#include <clrun/exec.h>
#include <clrun/pipeline.h>
#include <clrun/run_parallel.h>
#include <clrun/grad.h>
#include <clrun/remat.h>
#include <clrun/weights.h>
#include <clrun/train_graph.h>
#include <clrun/train.h>
#include <clrun/train_parallel.h>
#include <clrun/npy.h>
#include <clrun/onnx.h>
#include <clrun/strategy.h>
#include <clrun/options.h>
#include <clrun/lifetimes.h>
#include <clrun/plan.h>
#include <clrun/plan_gen.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version ("0.1.0"), which may differ from the header's when linked dynamically. */
const char *clrun_version(void);

#ifdef __cplusplus
}
#endif
#endif
