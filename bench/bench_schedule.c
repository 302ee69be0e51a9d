/* Scheduling time against graph size: chains (each node reads the one before) and wide graphs
 * (N branches of one input, summed in a chain), 10k to 100k nodes, built with the graph API,
 * written to the text format and parsed back, validated and scheduled. Prints each phase's
 * time and its time per node relative to the smallest size in the same run: flat ratios mean
 * linear growth. A benchmark, never a test. Usage: bench_schedule [MAX_NODES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "core/util.h"
#include "exec/schedule.h"
#include "graph/graph.h"

static void die(const char *what)
{
    fprintf(stderr, "bench_schedule: %s: %s\n", what, clrun_last_error(NULL));
    exit(1);
}

/* x -> relu -> relu -> ... (n nodes), or, wide, n relu(x) branches added up one by one. */
static clrun_graph *make_graph(int32_t n, bool wide)
{
    clrun_graph *g = NULL;
    if (clrun_graph_create(wide ? "wide" : "chain", &g) != CLRUN_OK)
        die("create");
    clrun_tensor_type t = {CLRUN_F32, 1, {64}};
    clrun_tensor_id x, last, sum = -1;
    if (clrun_graph_add_input(g, "x", &t, false, &x) != CLRUN_OK)
        die("input");
    last = x;
    char name[32];
    const char *names[1] = {name};
    int32_t branches = wide ? n / 2 : n;
    for (int32_t i = 0; i < branches; i++) {
        snprintf(name, sizeof name, "r%d", (int)i);
        clrun_tensor_id in = wide ? x : last, out;
        if (clrun_graph_add_node(g, "relu", &in, 1, names, 1, NULL, 0, &out) != CLRUN_OK)
            die("relu");
        last = out;
        if (!wide)
            continue;
        if (sum < 0) {
            sum = out;
            continue;
        }
        snprintf(name, sizeof name, "s%d", (int)i);
        clrun_tensor_id pair[2] = {sum, out};
        if (clrun_graph_add_node(g, "add", pair, 2, names, 1, NULL, 0, &sum) != CLRUN_OK)
            die("add");
    }
    if (clrun_graph_mark_output(g, wide ? sum : last) != CLRUN_OK)
        die("output");
    return g;
}

typedef struct phases {
    double build, parse, validate, schedule;
} phases;

static phases measure(int32_t n, bool wide)
{
    phases p;
    double t = clrun__now();
    clrun_graph *g = make_graph(n, wide);
    p.build = clrun__now() - t;
    char *text = NULL;
    size_t length = 0;
    FILE *f = open_memstream(&text, &length);
    if (f == NULL || clrun_graph_write(g, f) != CLRUN_OK || fclose(f) != 0)
        die("write");
    clrun_graph *parsed = NULL;
    char err[512];
    t = clrun__now();
    if (clrun_graph_parse(text, length, "bench", &parsed, err, sizeof err) != CLRUN_OK)
        die(err);
    p.parse = clrun__now() - t;
    t = clrun__now();
    if (clrun_graph_validate(parsed) != CLRUN_OK)
        die("validate");
    p.validate = clrun__now() - t;
    t = clrun__now();
    clrun__schedule s;
    if (clrun__schedule_build(parsed, true, &s, err, sizeof err) != CLRUN_OK)
        die(err);
    p.schedule = clrun__now() - t;
    clrun__schedule_free(&s);
    clrun_graph_destroy(parsed);
    clrun_graph_destroy(g);
    free(text);
    return p;
}

int main(int argc, char **argv)
{
    int32_t most = argc > 1 ? (int32_t)atoi(argv[1]) : 100000;
    static const int32_t sizes[] = {10000, 20000, 40000, 100000};
    printf("bench_schedule: seconds per phase; (x) = time per node over the 10k graph's, same run\n");
    for (int wide = 0; wide < 2; wide++) {
        phases base = {0, 0, 0, 0};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && sizes[i] <= most; i++) {
            phases p = measure(sizes[i], wide);
            double scale = (double)sizes[0] / (double)sizes[i];
            if (i == 0)
                base = p;
            printf("%-5s %6d nodes  build %.3f (%.2fx)  parse %.3f (%.2fx)  validate %.3f (%.2fx)  "
                   "schedule %.3f (%.2fx)\n", wide ? "wide" : "chain", (int)sizes[i], p.build,
                   p.build * scale / base.build, p.parse, p.parse * scale / base.parse, p.validate,
                   p.validate * scale / base.validate, p.schedule, p.schedule * scale / base.schedule);
        }
    }
    return 0;
}
