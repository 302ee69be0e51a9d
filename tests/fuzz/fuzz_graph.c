/* libFuzzer target for the .graph parser and, through it, the graph builder: any bytes must give
 * CLRUN_OK or a status with a "fuzz.graph:LINE:COL: message", never a crash, a leak or an
 * unterminated message. A graph that parses must validate, write, and read back identical. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/graph.h>

#include "graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(clrun_graph *graph)
{
    if (clrun_graph_validate(graph) != CLRUN_OK)
        abort(); /* the parser validates what it returns */
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (!out)
        return;
    if (clrun_graph_write(graph, out) != CLRUN_OK)
        abort();
    fclose(out);
    clrun_graph *again = NULL;
    char err[256];
    if (clrun_graph_parse(text, length, "written.graph", &again, err, sizeof err) != CLRUN_OK) {
        fprintf(stderr, "written graph does not read back: %s\n%s", err, text);
        abort();
    }
    char why[128];
    if (!clrun__graph_equal(graph, again, why, sizeof why)) {
        fprintf(stderr, "written graph reads back different: %s\n%s", why, text);
        abort();
    }
    clrun_graph_destroy(again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clrun_graph *graph = NULL;
    char err[160];
    memset(err, 'x', sizeof err);
    clrun_status status =
        clrun_graph_parse((const char *)data, size, "fuzz.graph", &graph, err, sizeof err);
    if (status == CLRUN_OK) {
        check_round_trip(graph);
        clrun_graph_destroy(graph);
        return 0;
    }
    if (graph || memchr(err, '\0', sizeof err) == NULL || strncmp(err, "fuzz.graph:", 11) != 0)
        abort();
    return 0;
}
