/* libFuzzer target for the ONNX importer: any bytes given to clrun_graph_load_onnx_memory must
 * give CLRUN_OK with a graph that validates, or a status with a terminated message that starts
 * with the file name, and no graph: never a crash, a leak, a hang or an unbounded allocation
 * (built with host tensors limited to 64 MiB, see lib/onnx/local.mk). External data is read
 * from a folder that does not exist, so the fuzzer never opens files. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/graph.h>
#include <clrun/onnx.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const clrun_onnx_dim dims[] = {{"N", 2}, {"batch", 1}, {"sequence", 3}};
    char err[256];
    memset(err, 'x', sizeof err);
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.dims = dims;
    o.dim_count = 0;
    o.default_dim = 2; /* symbolic dims bound, so models get past their inputs */
    o.external_data_dir = "/nonexistent/clrun-fuzz";
    o.err = err;
    o.errlen = sizeof err;
    clrun_graph *graph = NULL;
    clrun_status status = clrun_graph_load_onnx_memory(data, size, "fuzz.onnx", &o, &graph);
    if (status == CLRUN_OK) {
        if (graph == NULL || clrun_graph_validate(graph) != CLRUN_OK)
            abort();
        clrun_graph_destroy(graph);
        return 0;
    }
    if (graph || memchr(err, '\0', sizeof err) == NULL || strncmp(err, "fuzz.onnx: ", 11) != 0)
        abort();
    return 0;
}
