/* clrun: reading the .graph text format (docs/graph-format.md).
 *
 * The parser reads the whole text into statements first, then builds the graph through the
 * public builder in dependency order: a node may use a tensor declared further down, so a cycle,
 * a name nobody defines and an output nobody produces are all reported against the line that
 * shows them. Every failure becomes one "FILE:LINE:COL: message"; the message texts are part of
 * the interface (tests/data/graphs/bad holds the exact ones). The parser never trusts its input:
 * it is run under libFuzzer (tests/fuzz/fuzz_graph.c).
 *
 * Numbers are read and written in the C locale whatever the program's locale says, so a file
 * written in one locale reads back in another. */
#include "graph/graph_read.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "core/util.h"

/* ---- building ---- */

/* The builder's reason for a failure, at a place in the file. What the builder calls an invalid
 * argument is the file's fault here (an output named twice, a fill the dtype cannot take): an
 * invalid graph, as clrun_graph_parse documents, so that a tool says "malformed input". */
static clrun_status fail_from_graph(parser *p, const clrun_graph *graph, int line, int col,
                                    clrun_status status)
{
    if (status == CLRUN_ERROR_INVALID_ARGUMENT)
        status = CLRUN_ERROR_INVALID_GRAPH;
    return clrun__gio_fail_at(p, line, col, status, "%s", clrun_graph_last_error(graph));
}

static clrun_status build_node(parser *p, clrun_graph *graph, statement *s)
{
    clrun_tensor_id inputs[MAX_NODE_INPUTS];
    const char *names[MAX_NODE_OUTPUTS];
    for (int i = 0; i < s->input_count; i++) {
        const name_site *site = &p->sites[clrun__gio_find_site(p, s->inputs[i].name)];
        inputs[i] = p->statements[site->statement].ids[site->index];
    }
    for (int o = 0; o < s->def_count; o++)
        names[o] = s->defs[o].name.name;
    clrun_status status = clrun_graph_add_node(graph, s->op, inputs, s->input_count, names,
                                               s->def_count, s->attrs, s->attr_count, s->ids);
    if (status != CLRUN_OK)
        return fail_from_graph(p, graph, s->op_line, s->op_col, status);
    graph->nodes[graph->node_count - 1].line = s->line;
    for (int o = 0; o < s->def_count; o++) {
        const definition *def = &s->defs[o];
        const clrun_tensor_type *inferred = &graph->tensors[s->ids[o]].type;
        if (def->typed && !clrun__type_equal(&def->type, inferred)) {
            char have[CLRUN__TYPE_TEXT], said[CLRUN__TYPE_TEXT];
            return clrun__gio_fail_at(p, def->type_line, def->type_col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is %s but its annotation says %s", def->name.name,
                           clrun__type_format(inferred, have, sizeof have),
                           clrun__type_format(&def->type, said, sizeof said));
        }
    }
    return CLRUN_OK;
}

/* Adds one statement whose inputs are all built. */
static clrun_status build_statement(parser *p, clrun_graph *graph, statement *s)
{
    s->ids = calloc((size_t)s->def_count + 1, sizeof *s->ids);
    if (!s->ids)
        return clrun__gio_out_of_memory(p);
    clrun_status status;
    const definition *def = &s->defs[0];
    if (s->kind == STATEMENT_NODE) {
        status = build_node(p, graph, s);
    } else if (s->kind == STATEMENT_INPUT) {
        status = clrun_graph_add_input(graph, def->name.name, &def->type, s->donated, s->ids);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, def->name.line, def->name.col, status);
    } else {
        status = clrun_graph_add_constant(graph, def->name.name, &def->type, s->data, s->fill,
                                          s->fill_a, s->fill_b, s->seed, s->ids);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, s->fill_line, s->fill_col, status);
    }
    for (int o = 0; status == CLRUN_OK && o < s->def_count; o++)
        graph->tensors[s->ids[o]].line = s->line;
    s->state = BUILT;
    return status;
}

/* One level of the depth-first walk: a statement and the next input it waits for. */
typedef struct frame {
    int32_t statement;
    int next_input;
} frame;

/* "cycle: a -> b -> a" for the statements on the stack from `from` to the top, the top one
 * reading `closing` (a tensor of stack[from]'s statement). */
static clrun_status fail_cycle(parser *p, const frame *stack, int32_t from, int32_t top,
                               const name_ref *closing)
{
    char text[512];
    size_t used = (size_t)snprintf(text, sizeof text, "%s", closing->name);
    for (int32_t f = from; f <= top && used < sizeof text; f++) {
        const statement *s = &p->statements[stack[f].statement];
        used += (size_t)snprintf(text + used, sizeof text - used, " -> %s",
                                 s->inputs[stack[f].next_input].name);
    }
    return clrun__gio_fail_at(p, closing->line, closing->col, CLRUN_ERROR_INVALID_GRAPH, "cycle: %s", text);
}

/* Builds statement `root` after everything it depends on, with an explicit stack (a long chain
 * of nodes must not exhaust the C stack). */
static clrun_status build_from(parser *p, clrun_graph *graph, int32_t root, frame *stack)
{
    int32_t top = 0;
    stack[0] = (frame){root, 0};
    p->statements[root].state = BUILDING;
    while (top >= 0) {
        frame *f = &stack[top];
        statement *s = &p->statements[f->statement];
        if (f->next_input == s->input_count) {
            clrun_status status = build_statement(p, graph, s);
            if (status != CLRUN_OK)
                return status;
            top--;
            continue;
        }
        const name_ref *input = &s->inputs[f->next_input];
        int32_t site = clrun__gio_find_site(p, input->name);
        if (site < 0)
            return clrun__gio_fail_at(p, input->line, input->col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is not defined", input->name);
        int32_t needed = p->sites[site].statement;
        if (p->statements[needed].state == BUILT) {
            f->next_input++;
        } else if (p->statements[needed].state == BUILDING) {
            int32_t from = top;
            while (stack[from].statement != needed)
                from--;
            return fail_cycle(p, stack, from, top, input);
        } else {
            p->statements[needed].state = BUILDING;
            stack[++top] = (frame){needed, 0};
        }
    }
    return CLRUN_OK;
}

static clrun_status build_graph(parser *p, clrun_graph *graph)
{
    frame *stack = malloc(((size_t)p->statement_count + 1) * sizeof *stack);
    if (!stack)
        return clrun__gio_out_of_memory(p);
    clrun_status status = CLRUN_OK;
    for (int32_t s = 0; status == CLRUN_OK && s < p->statement_count; s++)
        if (p->statements[s].state == NOT_BUILT)
            status = build_from(p, graph, s, stack);
    free(stack);
    return status;
}

static clrun_status mark_outputs(parser *p, clrun_graph *graph)
{
    for (int32_t i = 0; i < p->output_count; i++) {
        const name_ref *name = &p->outputs[i];
        int32_t site = clrun__gio_find_site(p, name->name);
        if (site < 0)
            return clrun__gio_fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                           "output '%s' is never produced", name->name);
        const name_site *where = &p->sites[site];
        clrun_status status =
            clrun_graph_mark_output(graph, p->statements[where->statement].ids[where->index]);
        if (status != CLRUN_OK)
            return fail_from_graph(p, graph, name->line, name->col, status);
    }
    return CLRUN_OK;
}

static void parser_free(parser *p)
{
    for (int32_t i = 0; i < p->statement_count; i++) {
        statement *s = &p->statements[i];
        for (int d = 0; d < s->def_count; d++)
            free(s->defs[d].name.name);
        for (int k = 0; k < s->input_count; k++)
            free(s->inputs[k].name);
        for (int a = 0; a < s->attr_count; a++)
            free((char *)s->attrs[a].name);
        free(s->defs);
        free(s->inputs);
        free(s->attrs);
        free(s->data);
        free(s->ids);
    }
    for (int32_t i = 0; i < p->output_count; i++)
        free(p->outputs[i].name);
    free(p->statements);
    free(p->sites);
    free(p->outputs);
    free(p->graph_name);
    clrun__name_index_free(&p->site_index);
}

/* Parse, build, mark, validate: the graph or the first failure in p->message. */
static clrun_status parse_and_build(parser *p, clrun_graph **out)
{
    clrun_status status = clrun__gio_parse_statements(p);
    if (status != CLRUN_OK)
        return status;
    clrun_graph *graph = NULL;
    status = clrun_graph_create(p->graph_name, &graph);
    if (status != CLRUN_OK)
        return clrun__gio_fail_at(p, p->graph_line, 1, status, "%s", clrun__error_get(NULL));
    status = build_graph(p, graph);
    if (status == CLRUN_OK)
        status = mark_outputs(p, graph);
    if (status == CLRUN_OK && (status = clrun_graph_validate(graph)) != CLRUN_OK)
        fail_from_graph(p, graph, p->tok.line, p->tok.col, status); /* at the end: what is missing */
    if (status != CLRUN_OK) {
        clrun_graph_destroy(graph);
        return status;
    }
    *out = graph;
    return CLRUN_OK;
}

clrun_status clrun_graph_parse(const char *text, size_t length, const char *filename,
                               clrun_graph **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out || (!text && length))
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_parse: %s is NULL",
                           out ? "text" : "out");
    *out = NULL;
    parser p;
    memset(&p, 0, sizeof p);
    p.lex = (lexer){text ? text : "", length, 0, 1, 1};
    p.filename = filename ? filename : "<input>";
    clrun__c_numeric scope = clrun__c_numeric_enter();
    clrun_status status = parse_and_build(&p, out);
    clrun__c_numeric_leave(scope);
    parser_free(&p);
    if (status != CLRUN_OK) {
        if (err && errlen)
            snprintf(err, errlen, "%s", p.message);
        clrun__error_set(NULL, status, "%s", p.message);
    }
    return status;
}

/* The most text the reader takes: a .graph file holds structure and seeded fills, and a larger
 * one (or a device, /dev/zero) is refused before it fills the host's memory. */
#define GRAPH_TEXT_MAX ((size_t)256 << 20)

clrun_status clrun_graph_load(const char *path, clrun_graph **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!path || !out)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "clrun_graph_load: %s is NULL",
                           path ? "out" : "path");
    *out = NULL;
    char *text = NULL;
    size_t length = 0;
    /* A regular file only (a FIFO or a device is refused, never waited on), read to its size. */
    clrun_status status = CLRUN_OK;
    char message[1024];
    char why[768] = "";
    void *data = clrun__file_read(path, GRAPH_TEXT_MAX, &length, &status, why, sizeof why);
    snprintf(message, sizeof message, "%s: %s", path, why);
    if (data != NULL) {
        text = realloc(data, length + 1);
        if (text == NULL) {
            free(data);
            status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
            snprintf(message, sizeof message, "%s: out of host memory reading it", path);
        } else {
            text[length] = '\0';
        }
    } else if (status == CLRUN_ERROR_INVALID_SIZE) {
        snprintf(message, sizeof message, "%s: cannot read: more than the %zu MiB a .graph file may hold",
                 path, GRAPH_TEXT_MAX >> 20);
    }
    if (text == NULL) {
        if (err && errlen)
            snprintf(err, errlen, "%s", message);
        return clrun__error_set(NULL, status, "%s", message);
    }
    status = clrun_graph_parse(text, length, path, out, err, errlen);
    free(text);
    return status;
}
