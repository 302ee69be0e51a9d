/* The .graph reader's parser: each statement (graph, input, const, node, output) read into a
 * statement record, names defined once. Nothing is built here: graph_build.c does that. */
#include "graph/graph_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"

/* ---- types ---- */

/* DTYPE '[' [DIM {',' DIM}] ']' */
static clrun_status parse_type(parser *p, clrun_tensor_type *type, int *line, int *col)
{
    *line = p->tok.line;
    *col = p->tok.col;
    if (p->tok.kind != TOKEN_NAME)
        return clrun__gio_fail_expected(p, "a dtype (f32, i32 or f16)");
    memset(type, 0, sizeof *type);
    if (!clrun__dtype_parse(p->tok.text, p->tok.length, &type->dtype)) {
        char found[QUOTE_MAX + 16];
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "unknown dtype %s",
                       clrun__gio_describe(&p->tok, found, sizeof found));
    }
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = clrun__gio_expect_punct(p, '[');
    while (status == CLRUN_OK && !clrun__gio_at_punct(p, ']')) {
        if (type->rank > 0 && (status = clrun__gio_expect_separator(p, ']')) != CLRUN_OK)
            break;
        if (type->rank == CLRUN_MAX_DIMS)
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many dimensions (at most %d)", CLRUN_MAX_DIMS);
        int dim_line = p->tok.line, dim_col = p->tok.col;
        int64_t dim = 0;
        if ((status = clrun__gio_take_int(p, "a dimension", &dim)) != CLRUN_OK)
            break;
        if (dim < 0)
            return clrun__gio_fail_at(p, dim_line, dim_col, CLRUN_ERROR_PARSE,
                           "dimension must be at least 0, found %" PRId64, dim);
        type->shape[type->rank++] = dim;
    }
    if (status == CLRUN_OK)
        status = clrun__gio_advance(p); /* the ']' */
    char reason[256];
    if (status == CLRUN_OK && clrun__type_check_value(type, reason, sizeof reason) != CLRUN_OK)
        return clrun__gio_fail_at(p, *line, *col, CLRUN_ERROR_INVALID_SIZE, "%s", reason);
    return status;
}

/* ---- definitions ---- */

static const char *site_name_of(const void *owner, int32_t entry)
{
    const parser *p = owner;
    const name_site *site = &p->sites[entry];
    return p->statements[site->statement].defs[site->index].name.name;
}

int32_t clrun__gio_find_site(const parser *p, const char *name)
{
    return clrun__name_index_find(&p->site_index, name, site_name_of, p);
}

/* Records that definition `index` of the current (last) statement defines its name. */
static clrun_status define_name(parser *p, int index)
{
    int32_t current = p->statement_count - 1;
    const statement *s = &p->statements[current];
    const name_ref *name = &s->defs[index].name;
    int32_t earlier = clrun__gio_find_site(p, name->name);
    if (earlier >= 0) {
        const statement *first = &p->statements[p->sites[earlier].statement];
        if (first->kind == STATEMENT_NODE && s->kind == STATEMENT_NODE)
            return clrun__gio_fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                           "'%s' is produced twice (first at line %d)", name->name, first->line);
        return clrun__gio_fail_at(p, name->line, name->col, CLRUN_ERROR_INVALID_GRAPH,
                       "'%s' is already defined at line %d", name->name, first->line);
    }
    name_site *sites = clrun__gio_grow(p->sites, &p->site_capacity, p->site_count, sizeof *sites);
    if (!sites)
        return clrun__gio_out_of_memory(p);
    p->sites = sites;
    if (clrun__name_index_reserve(&p->site_index, p->site_count + 1, site_name_of, p) != CLRUN_OK)
        return clrun__gio_out_of_memory(p);
    p->sites[p->site_count] = (name_site){current, index};
    clrun__name_index_add(&p->site_index, name->name, p->site_count);
    p->site_count++;
    return CLRUN_OK;
}

/* A new statement at the end of the list, zeroed, for the keyword under the cursor. */
static statement *new_statement(parser *p, statement_kind kind)
{
    statement *all = clrun__gio_grow(p->statements, &p->statement_capacity, p->statement_count, sizeof *all);
    if (!all)
        return NULL;
    p->statements = all;
    statement *s = &p->statements[p->statement_count++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->line = p->tok.line;
    s->col = p->tok.col;
    return s;
}

/* The one definition of an input or constant: NAME ':' TYPE */
static clrun_status parse_typed_name(parser *p, statement *s)
{
    s->defs = calloc(1, sizeof *s->defs);
    if (!s->defs)
        return clrun__gio_out_of_memory(p);
    s->def_count = 1;
    definition *def = &s->defs[0];
    clrun_status status = clrun__gio_take_name(p, "a tensor name", &def->name);
    if (status == CLRUN_OK)
        status = define_name(p, 0);
    if (status == CLRUN_OK)
        status = clrun__gio_expect_punct(p, ':');
    if (status == CLRUN_OK)
        status = parse_type(p, &def->type, &def->type_line, &def->type_col);
    def->typed = true;
    return status;
}

/* ---- statements ---- */

/* graph NAME */
static clrun_status parse_graph(parser *p)
{
    int line = p->tok.line, col = p->tok.col;
    if (p->graph_name)
        return clrun__gio_fail_at(p, line, col, CLRUN_ERROR_PARSE, "second 'graph' header (the first is at line %d)",
                       p->graph_line);
    if (p->seen_statement)
        return clrun__gio_fail_at(p, line, col, CLRUN_ERROR_PARSE, "'graph' must come before every other statement");
    name_ref name = {NULL, 0, 0};
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = clrun__gio_take_name(p, "a graph name", &name);
    p->graph_name = name.name;
    p->graph_line = line;
    return status == CLRUN_OK ? clrun__gio_expect_line_end(p) : status;
}

/* input NAME ':' TYPE ['donated'] */
static clrun_status parse_input(parser *p)
{
    statement *s = new_statement(p, STATEMENT_INPUT);
    if (!s)
        return clrun__gio_out_of_memory(p);
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = parse_typed_name(p, s);
    if (status == CLRUN_OK && clrun__gio_at_word(p, "donated")) {
        s->donated = true;
        status = clrun__gio_advance(p);
    }
    if (status == CLRUN_OK && !clrun__gio_at_line_end(p))
        return clrun__gio_fail_expected(p, "'donated' or end of line");
    return status;
}

/* What an integer value of a data list must be: "a 16-bit pattern", "an i32", ... */
static const char *integer_kind(clrun_dtype dtype, bool bits)
{
    if (bits) {
        switch (clrun_dtype_size(dtype)) {
        case 1: return "an 8-bit pattern";
        case 2: return "a 16-bit pattern";
        case 4: return "a 32-bit pattern";
        default: return "a 64-bit pattern";
        }
    }
    switch (dtype) {
    case CLRUN_BOOL: return "a bool (0 or 1)";
    case CLRUN_I64: return "an i64";
    case CLRUN_I8: return "an i8";
    case CLRUN_U8: return "a u8";
    case CLRUN_I16: return "an i16";
    case CLRUN_U16: return "a u16";
    case CLRUN_U32: return "a u32";
    case CLRUN_U64: return "a u64 (below 2^63; larger ones as bits=[...])";
    default: return "an i32";
    }
}

/* Stores an integer value (or, bits, a bit pattern) of the dtype at slot; refuses one that does
 * not fit. */
static clrun_status store_integer(parser *p, clrun_dtype dtype, bool bits, int64_t integer,
                                  const char *found, unsigned char *slot)
{
    size_t size = clrun_dtype_size(dtype);
    uint64_t pattern = (uint64_t)integer;
    bool fits;
    if (bits)
        fits = size == 8 || pattern < (1ull << (8 * size));
    else if (dtype == CLRUN_BOOL)
        fits = integer == 0 || integer == 1;
    else if (dtype == CLRUN_I64 || dtype == CLRUN_U64)
        fits = dtype == CLRUN_I64 || integer >= 0;
    else {
        double lo, hi;
        clrun__int_range(dtype, &lo, &hi);
        fits = (double)integer >= lo && (double)integer <= hi;
    }
    if (!fits)
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE, "%s does not fit %s", found,
                       integer_kind(dtype, bits));
    /* Little-endian hosts only (as every OpenCL device the ICD loader serves here): the low
     * `size` bytes of the pattern are the element. */
    memcpy(slot, &pattern, size);
    return CLRUN_OK;
}

/* Stores a real value rounded to the float dtype at slot. */
static void store_real(clrun_dtype dtype, double real, unsigned char *slot)
{
    if (dtype == CLRUN_F64) {
        memcpy(slot, &real, 8);
    } else if (dtype == CLRUN_F16 || dtype == CLRUN_BF16) {
        uint16_t half = dtype == CLRUN_F16 ? clrun__f32_to_f16((float)real) : clrun__f32_to_bf16((float)real);
        memcpy(slot, &half, 2);
    } else {
        float value = (float)real;
        memcpy(slot, &value, 4);
    }
}

/* '[' VALUE {',' VALUE} ']' of a constant's data into s->data. bits: each value is the
 * element's bit pattern; otherwise its value (an integer for i32 and i64, 0 or 1 for bool). */
static clrun_status parse_data(parser *p, statement *s, bool bits)
{
    const clrun_tensor_type *type = &s->defs[0].type;
    size_t size = clrun_dtype_size(type->dtype);
    uint64_t elements = clrun_tensor_elements(type);
    int bracket_line = p->tok.line, bracket_col = p->tok.col;
    clrun_status status = clrun__gio_expect_punct(p, '[');
    unsigned char *bytes = NULL;
    int32_t count = 0, capacity = 0;
    while (status == CLRUN_OK && !clrun__gio_at_punct(p, ']')) {
        if (count > 0 && (status = clrun__gio_expect_separator(p, ']')) != CLRUN_OK)
            break;
        if ((uint64_t)count == elements) {
            free(bytes);
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "more values than the %" PRIu64 " elements of '%s'", elements,
                           s->defs[0].name.name);
        }
        if (p->tok.kind != TOKEN_NUMBER) {
            free(bytes);
            return clrun__gio_fail_expected(p, "a value");
        }
        unsigned char *more = clrun__gio_grow(bytes, &capacity, count, size);
        if (!more) {
            free(bytes);
            return clrun__gio_out_of_memory(p);
        }
        bytes = more;
        unsigned char *slot = bytes + (size_t)count * size;
        int64_t integer = 0;
        double real = 0;
        char found[QUOTE_MAX + 16];
        clrun__gio_describe(&p->tok, found, sizeof found);
        bool integral = clrun__dtype_is_int(type->dtype) || type->dtype == CLRUN_BOOL;
        if (bits || integral) {
            number_result r = clrun__gio_token_int(&p->tok, &integer);
            status = r == NUMBER_OK ? store_integer(p, type->dtype, bits, integer, found, slot)
                                    : clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                                              r == NUMBER_NOT_INTEGER ? "%s is not %s"
                                                                      : "%s does not fit %s",
                                              found, integer_kind(type->dtype, bits));
            if (status != CLRUN_OK) {
                free(bytes);
                return status;
            }
        } else {
            if (!clrun__gio_token_real(&p->tok, type->dtype != CLRUN_F64, &real)) {
                free(bytes);
                return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                               "%s is not a finite %s value", found, clrun_dtype_name(type->dtype));
            }
            store_real(type->dtype, real, slot);
        }
        count++;
        status = clrun__gio_advance(p);
    }
    if (status == CLRUN_OK && (uint64_t)count != elements) {
        char text[CLRUN__TYPE_TEXT];
        status = clrun__gio_fail_at(p, bracket_line, bracket_col, CLRUN_ERROR_PARSE,
                         "%d value%s given, %s holds %" PRIu64, (int)count, count == 1 ? "" : "s",
                         clrun__type_format(type, text, sizeof text), elements);
    }
    if (status == CLRUN_OK)
        status = clrun__gio_advance(p); /* the ']' */
    if (status != CLRUN_OK) {
        free(bytes);
        return status;
    }
    s->data = bytes;
    return CLRUN_OK;
}

/* '(' A ',' B ')' of uniform and normal. */
static clrun_status parse_fill_parameters(parser *p, statement *s)
{
    clrun_status status = clrun__gio_expect_punct(p, '(');
    if (status == CLRUN_OK)
        status = clrun__gio_take_real(p, "a number", &s->fill_a);
    if (status == CLRUN_OK)
        status = clrun__gio_expect_punct(p, ',');
    if (status == CLRUN_OK)
        status = clrun__gio_take_real(p, "a number", &s->fill_b);
    return status == CLRUN_OK ? clrun__gio_expect_punct(p, ')') : status;
}

/* zeros | ones | uniform(A, B) | normal(MEAN, STD) | data=[...] | bits=[...], then seed=N for the
 * random fills. */
static clrun_status parse_fill(parser *p, statement *s)
{
    s->fill_line = p->tok.line;
    s->fill_col = p->tok.col;
    static const char *const expected =
        "a fill (zeros, ones, uniform(a, b), normal(mean, std), data=[...] or bits=[...])";
    bool random = clrun__gio_at_word(p, "uniform") || clrun__gio_at_word(p, "normal");
    bool data = clrun__gio_at_word(p, "data"), bits = clrun__gio_at_word(p, "bits");
    if (!random && !data && !bits && !clrun__gio_at_word(p, "zeros") && !clrun__gio_at_word(p, "ones"))
        return clrun__gio_fail_expected(p, expected);
    s->fill = clrun__gio_at_word(p, "ones") ? CLRUN_FILL_ONES
              : clrun__gio_at_word(p, "uniform") ? CLRUN_FILL_UNIFORM
              : clrun__gio_at_word(p, "normal") ? CLRUN_FILL_NORMAL
                                     : CLRUN_FILL_ZEROS;
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK && random)
        status = parse_fill_parameters(p, s);
    if (status == CLRUN_OK && (data || bits)) {
        status = clrun__gio_expect_punct(p, '=');
        if (status == CLRUN_OK)
            status = parse_data(p, s, bits);
    }
    if (status != CLRUN_OK || !clrun__gio_at_word(p, "seed"))
        return status;
    if (!random)
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                       "seed= applies only to uniform and normal fills");
    status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = clrun__gio_expect_punct(p, '=');
    int64_t seed = 0;
    bool negative = p->tok.kind == TOKEN_NUMBER && p->tok.text[0] == '-';
    int seed_line = p->tok.line, seed_col = p->tok.col;
    if (status == CLRUN_OK)
        status = clrun__gio_take_int(p, "a seed", &seed);
    if (status == CLRUN_OK && negative)
        return clrun__gio_fail_at(p, seed_line, seed_col, CLRUN_ERROR_PARSE, "a seed cannot be negative");
    s->seed = (uint64_t)seed; /* seeds above 2^63 are written in hex */
    return status;
}

/* const NAME ':' TYPE FILL */
static clrun_status parse_const(parser *p)
{
    statement *s = new_statement(p, STATEMENT_CONST);
    if (!s)
        return clrun__gio_out_of_memory(p);
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = parse_typed_name(p, s);
    if (status == CLRUN_OK)
        status = parse_fill(p, s);
    return status == CLRUN_OK ? clrun__gio_expect_line_end(p) : status;
}

/* NAME [':' TYPE] {',' NAME [':' TYPE]} before the '=' of a node. */
static clrun_status parse_node_outputs(parser *p, statement *s)
{
    int32_t capacity = 0;
    clrun_status status = CLRUN_OK;
    while (status == CLRUN_OK) {
        if (s->def_count == MAX_NODE_OUTPUTS)
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many outputs (at most %d)", MAX_NODE_OUTPUTS);
        definition *defs = clrun__gio_grow(s->defs, &capacity, s->def_count, sizeof *defs);
        if (!defs)
            return clrun__gio_out_of_memory(p);
        s->defs = defs;
        definition *def = &s->defs[s->def_count];
        memset(def, 0, sizeof *def);
        if ((status = clrun__gio_take_name(p, "an output name", &def->name)) != CLRUN_OK)
            break;
        s->def_count++;
        if ((status = define_name(p, s->def_count - 1)) != CLRUN_OK)
            break;
        if (clrun__gio_at_punct(p, ':')) {
            def->typed = true;
            if ((status = clrun__gio_advance(p)) == CLRUN_OK)
                status = parse_type(p, &def->type, &def->type_line, &def->type_col);
        }
        if (status != CLRUN_OK || !clrun__gio_at_punct(p, ','))
            break;
        status = clrun__gio_advance(p);
    }
    return status;
}

/* '(' [NAME {',' NAME}] ')' */
static clrun_status parse_node_inputs(parser *p, statement *s)
{
    int32_t capacity = 0;
    clrun_status status = clrun__gio_expect_punct(p, '(');
    while (status == CLRUN_OK && !clrun__gio_at_punct(p, ')')) {
        if (s->input_count > 0 && (status = clrun__gio_expect_separator(p, ')')) != CLRUN_OK)
            break;
        if (s->input_count == MAX_NODE_INPUTS)
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many inputs (at most %d)", MAX_NODE_INPUTS);
        name_ref *inputs = clrun__gio_grow(s->inputs, &capacity, s->input_count, sizeof *inputs);
        if (!inputs)
            return clrun__gio_out_of_memory(p);
        s->inputs = inputs;
        if ((status = clrun__gio_take_name(p, "an input name", &s->inputs[s->input_count])) != CLRUN_OK)
            break;
        s->input_count++;
    }
    return status == CLRUN_OK ? clrun__gio_advance(p) : status;
}

/* '[' [INT {',' INT}] ']' */
static clrun_status parse_int_list(parser *p, clrun_attr *attr)
{
    clrun_status status = clrun__gio_advance(p);
    attr->kind = CLRUN_ATTR_INTS;
    while (status == CLRUN_OK && !clrun__gio_at_punct(p, ']')) {
        if (attr->count > 0 && (status = clrun__gio_expect_separator(p, ']')) != CLRUN_OK)
            break;
        if (attr->count == CLRUN_MAX_ATTR_INTS)
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "attribute '%s' has more than %d values", attr->name,
                           CLRUN_MAX_ATTR_INTS);
        status = clrun__gio_take_int(p, "a list value", &attr->ints[attr->count]);
        attr->count += status == CLRUN_OK;
    }
    return status == CLRUN_OK ? clrun__gio_advance(p) : status;
}

/* KEY '=' (INT | FLOAT | '[' INTS ']'): an integer is written without '.' or exponent. */
static clrun_status parse_attribute(parser *p, statement *s)
{
    clrun_attr *attr = &s->attrs[s->attr_count];
    memset(attr, 0, sizeof *attr);
    name_ref key = {NULL, 0, 0};
    clrun_status status = clrun__gio_take_name(p, "an attribute or end of line", &key);
    attr->name = key.name;
    if (status != CLRUN_OK)
        return status;
    s->attr_count++;
    for (int i = 0; i < s->attr_count - 1; i++)
        if (strcmp(s->attrs[i].name, key.name) == 0)
            return clrun__gio_fail_at(p, key.line, key.col, CLRUN_ERROR_PARSE,
                           "attribute '%s' given twice", key.name);
    if ((status = clrun__gio_expect_punct(p, '=')) != CLRUN_OK)
        return status;
    if (clrun__gio_at_punct(p, '['))
        return parse_int_list(p, attr);
    if (p->tok.kind != TOKEN_NUMBER)
        return clrun__gio_fail_expected(p, "a number or a list");
    int64_t integer;
    number_result r = clrun__gio_token_int(&p->tok, &integer);
    if (r == NUMBER_OK) {
        attr->kind = CLRUN_ATTR_INT;
        attr->i = integer;
        return clrun__gio_advance(p);
    }
    if (r == NUMBER_OUT_OF_RANGE)
        return clrun__gio_take_int(p, "a number", &integer); /* reports the range */
    attr->kind = CLRUN_ATTR_FLOAT;
    return clrun__gio_take_real(p, "a number", &attr->f);
}

/* node OUTPUTS '=' OP '(' INPUTS ')' {ATTRIBUTE} */
static clrun_status parse_node(parser *p)
{
    statement *s = new_statement(p, STATEMENT_NODE);
    if (!s)
        return clrun__gio_out_of_memory(p);
    clrun_status status = clrun__gio_advance(p);
    if (status == CLRUN_OK)
        status = parse_node_outputs(p, s);
    if (status == CLRUN_OK)
        status = clrun__gio_expect_punct(p, '=');
    if (status != CLRUN_OK)
        return status;
    if (p->tok.kind != TOKEN_NAME)
        return clrun__gio_fail_expected(p, "an op name");
    char op[64] = "";
    if (p->tok.length < sizeof op)
        memcpy(op, p->tok.text, p->tok.length);
    const clrun__op *found = op[0] ? clrun__op_find(op) : NULL;
    if (!found) {
        char name[QUOTE_MAX + 16];
        return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_UNKNOWN_KERNEL, "unknown op %s",
                       clrun__gio_describe(&p->tok, name, sizeof name));
    }
    s->op = found->name;
    s->op_line = p->tok.line;
    s->op_col = p->tok.col;
    if ((status = clrun__gio_advance(p)) == CLRUN_OK)
        status = parse_node_inputs(p, s);
    int32_t capacity = 0; /* the attributes grow as they come: most nodes have few or none */
    while (status == CLRUN_OK && !clrun__gio_at_line_end(p)) {
        if (s->attr_count == MAX_NODE_ATTRS)
            return clrun__gio_fail_at(p, p->tok.line, p->tok.col, CLRUN_ERROR_PARSE,
                           "too many attributes (at most %d)", MAX_NODE_ATTRS);
        clrun_attr *attrs = clrun__gio_grow(s->attrs, &capacity, s->attr_count, sizeof *attrs);
        if (attrs == NULL)
            return clrun__gio_out_of_memory(p);
        s->attrs = attrs;
        status = parse_attribute(p, s);
    }
    return status;
}

/* output NAME {',' NAME} */
static clrun_status parse_output(parser *p)
{
    clrun_status status = clrun__gio_advance(p);
    do {
        if (status != CLRUN_OK)
            break;
        name_ref *outputs = clrun__gio_grow(p->outputs, &p->output_capacity, p->output_count, sizeof *outputs);
        if (!outputs)
            return clrun__gio_out_of_memory(p);
        p->outputs = outputs;
        if ((status = clrun__gio_take_name(p, "an output name", &p->outputs[p->output_count])) != CLRUN_OK)
            break;
        p->output_count++;
        if (!clrun__gio_at_punct(p, ','))
            break;
        status = clrun__gio_advance(p);
    } while (status == CLRUN_OK);
    return status == CLRUN_OK ? clrun__gio_expect_line_end(p) : status;
}

static clrun_status parse_statement(parser *p)
{
    if (clrun__gio_at_word(p, "graph"))
        return parse_graph(p);
    p->seen_statement = true;
    if (clrun__gio_at_word(p, "input"))
        return parse_input(p);
    if (clrun__gio_at_word(p, "const"))
        return parse_const(p);
    if (clrun__gio_at_word(p, "node"))
        return parse_node(p);
    if (clrun__gio_at_word(p, "output"))
        return parse_output(p);
    return clrun__gio_fail_expected(p, "a statement (graph, input, const, node or output)");
}

clrun_status clrun__gio_parse_statements(parser *p)
{
    clrun_status status = clrun__gio_advance(p);
    while (status == CLRUN_OK && p->tok.kind != TOKEN_END) {
        if (p->tok.kind == TOKEN_NEWLINE)
            status = clrun__gio_advance(p);
        else
            status = parse_statement(p);
    }
    return status;
}
