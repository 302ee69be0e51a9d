/* The unfused kernels of the elementwise ops. Each op's kernels are generated from its table
 * expression (ops/ew_source.h) into one program per op, built once per context on first use and
 * cached on disk like the embedded kernels. A node whose inputs all have its output's element
 * count reads them at the output's index; otherwise the shapes are merged into as few dimensions
 * as possible (dimensions of 1 dropped, neighbours every input walks as one joined), and up to
 * three of them are the NDRange's, so no work-item divides; more take a table and divide.
 * copy moves bits with the embedded clrun_copy_* kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cl.h"
#include "device/program.h"
#include "ops/ew_source.h"
#include "ops/matmul_core.h"
#include "ops/ops_internal.h"

/* ---- broadcast geometry ------------------------------------------------------------------ */

/* The merged broadcast of a node: `rank` dimensions, outermost first, and each input's element
 * strides along them (0 where it is broadcast). */
typedef struct ew_geometry {
    int rank;
    uint64_t dims[CLRUN_MAX_DIMS];
    uint64_t strides[CLRUN__EW_MAX_INPUTS][CLRUN_MAX_DIMS];
} ew_geometry;

static void merge_geometry(const clrun__op_call *call, ew_geometry *g)
{
    const clrun_tensor_type *out = &call->outputs[0];
    uint64_t s[CLRUN__EW_MAX_INPUTS][CLRUN_MAX_DIMS];
    int inputs = call->input_count;
    for (int k = 0; k < inputs; k++)
        clrun__broadcast_strides(&call->inputs[k], out, s[k]);
    g->rank = 0;
    for (int d = 0; d < out->rank; d++) {
        uint64_t n = (uint64_t)out->shape[d];
        if (n == 1)
            continue;
        bool joins = g->rank > 0;
        for (int k = 0; joins && k < inputs; k++)
            joins = g->strides[k][g->rank - 1] == s[k][d] * n;
        if (joins) {
            g->dims[g->rank - 1] *= n;
            for (int k = 0; k < inputs; k++)
                g->strides[k][g->rank - 1] = s[k][d];
            continue;
        }
        g->dims[g->rank] = n;
        for (int k = 0; k < inputs; k++)
            g->strides[k][g->rank] = s[k][d];
        g->rank++;
    }
    if (g->rank == 0) {
        g->dims[0] = 1;
        for (int k = 0; k < inputs; k++)
            g->strides[k][0] = 0;
        g->rank = 1;
    }
}

static bool reads_own_index(const clrun__op_call *call)
{
    uint64_t n = clrun_tensor_elements(&call->outputs[0]);
    for (int k = 0; k < call->input_count; k++)
        if (clrun_tensor_elements(&call->inputs[k]) != n)
            return false;
    return true;
}

/* ---- arguments --------------------------------------------------------------------------- */

static clrun_status set_ulong(clrun_context *ctx, cl_kernel kernel, cl_uint *next, uint64_t v)
{
    cl_ulong value = v;
    return clrun__arg(ctx, kernel, (*next)++, sizeof value, &value);
}

/* A parameter in the data dtype's type (f16 computes in float, so its parameters are floats). */
static clrun_status set_param(clrun_context *ctx, cl_kernel kernel, cl_uint *next, clrun_dtype dtype,
                              double v)
{
    clrun_dtype type = dtype == CLRUN_F16 || dtype == CLRUN_BF16 ? CLRUN_F32 : dtype;
    uint64_t value = 0;
    clrun__dtype_from_double(type, v, &value);
    return clrun__arg(ctx, kernel, (*next)++, clrun_dtype_size(type), &value);
}

static clrun_status set_params(clrun_context *ctx, const clrun__ew_def *def,
                               const clrun__op_call *call, cl_kernel kernel, cl_uint *next)
{
    clrun_dtype data = clrun__ew_data_dtype(def, call);
    clrun_status s = CLRUN_OK;
    for (int p = 0; s == CLRUN_OK && p < def->param_count; p++)
        s = set_param(ctx, kernel, next, data, clrun__ew_param_value(def, call, p, data));
    return s;
}

/* ---- prepare ----------------------------------------------------------------------------- */

/* The smallest power of two >= n, at most 256: a work-group that wastes little on a short row
 * (the callers then make a group that would cover the whole row exactly the row: see
 * clrun__row_group). */
static size_t group_for(uint64_t n)
{
    size_t g = 1;
    while (g < 256 && g < n)
        g *= 2;
    return g;
}

static clrun_status prepare_flat(clrun_context *ctx, const clrun__ew_def *def,
                                 const clrun__op_call *call, clrun__kernel_state *st)
{
    uint64_t n = clrun_tensor_elements(&call->outputs[0]);
    cl_uint next = st->inputs + 1;
    clrun_status s = clrun__local_size(ctx, st->kernel, 256, &st->local[0]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, n);
    if (s == CLRUN_OK && def)
        s = set_params(ctx, def, call, st->kernel, &next);
    st->dims = 1;
    st->global[0] = clrun__round_up((size_t)n, st->local[0]);
    return s;
}

static clrun_status prepare_broadcast3(clrun_context *ctx, const clrun__ew_def *def,
                                       const clrun__op_call *call, const ew_geometry *g,
                                       clrun__kernel_state *st)
{
    int r = g->rank;
    uint64_t n[3] = {g->dims[r - 1], r > 1 ? g->dims[r - 2] : 1, r > 2 ? g->dims[r - 3] : 1};
    cl_uint next = st->inputs + 1;
    clrun_status s = clrun__local_size(ctx, st->kernel, group_for(n[0]), &st->local[0]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, n[0]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, n[1]);
    for (int k = 0; k < call->input_count; k++)
        for (int d = 0; s == CLRUN_OK && d < 3; d++)
            s = set_ulong(ctx, st->kernel, &next, r - 1 - d >= 0 ? g->strides[k][r - 1 - d] : 0);
    if (s == CLRUN_OK)
        s = set_params(ctx, def, call, st->kernel, &next);
    st->dims = 3;
    st->local[0] = clrun__row_group(st->local[0], n[0]);
    st->global[0] = clrun__round_up((size_t)n[0], st->local[0]);
    st->global[1] = (size_t)n[1];
    st->global[2] = (size_t)n[2];
    st->local[1] = st->local[2] = 1;
    return s;
}

/* A row of more than ROWS_BLOCK elements is split into blocks of that many, a work-item each. */
#define ROWS_BLOCK 4096

int clrun__ew_rows = -1;

/* Which operand of a binary broadcast of rank 3 or less runs along the rows (stride 1) while the
 * other stays constant along them: 0 or 1; -1 when neither. */
static int row_operand(const clrun__op_call *call, const ew_geometry *g)
{
    if (call->input_count != 2 || g->rank < 1 || g->rank > 3)
        return -1;
    const uint64_t a = g->strides[0][g->rank - 1], b = g->strides[1][g->rank - 1];
    return a == 1 && b == 0 ? 0 : a == 0 && b == 1 ? 1 : -1;
}

/* The _rows kernel (ew_source.c's emit_rows): a work-item per block of a row, groups of one. */
static clrun_status prepare_rows(clrun_context *ctx, const clrun__ew_def *def, const clrun__op_call *call,
                                 const ew_geometry *g, int row, clrun__kernel_state *st)
{
    int r = g->rank;
    uint64_t n[3] = {g->dims[r - 1], r > 1 ? g->dims[r - 2] : 1, r > 2 ? g->dims[r - 3] : 1};
    uint64_t block = n[0] == 0 ? 1 : n[0] < ROWS_BLOCK ? n[0] : ROWS_BLOCK; /* no empty rows reach here */
    cl_uint next = st->inputs + 1;
    cl_int which = row;
    clrun_status s = set_ulong(ctx, st->kernel, &next, n[0]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, n[1]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, block);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, next++, sizeof which, &which);
    for (int k = 0; k < 2; k++)
        for (int d = 1; s == CLRUN_OK && d < 3; d++)
            s = set_ulong(ctx, st->kernel, &next, r - 1 - d >= 0 ? g->strides[k][r - 1 - d] : 0);
    if (s == CLRUN_OK)
        s = set_params(ctx, def, call, st->kernel, &next);
    st->dims = 3;
    st->global[0] = (size_t)((n[0] + block - 1) / block);
    st->global[1] = (size_t)n[1];
    st->global[2] = (size_t)n[2];
    st->local[0] = st->local[1] = st->local[2] = 1;
    return s;
}

static clrun_status prepare_broadcast_n(clrun_context *ctx, const clrun__ew_def *def,
                                        const clrun__op_call *call, const ew_geometry *g,
                                        clrun__kernel_state *st)
{
    uint64_t table[1 + (1 + CLRUN__EW_MAX_INPUTS) * CLRUN_MAX_DIMS];
    size_t used = 0;
    table[used++] = (uint64_t)g->rank;
    for (int d = 0; d < g->rank; d++)
        table[used++] = g->dims[d];
    for (int k = 0; k < call->input_count; k++)
        for (int d = 0; d < g->rank; d++)
            table[used++] = g->strides[k][d];
    uint64_t n = clrun_tensor_elements(&call->outputs[0]);
    cl_uint next = st->inputs + 1;
    clrun_status s = clrun__table_buffer(ctx, table, used * sizeof table[0], &st->table);
    if (s == CLRUN_OK)
        s = clrun__local_size(ctx, st->kernel, 256, &st->local[0]);
    if (s == CLRUN_OK)
        s = set_ulong(ctx, st->kernel, &next, n);
    if (s == CLRUN_OK)
        s = clrun__arg(ctx, st->kernel, next++, sizeof st->table, &st->table);
    if (s == CLRUN_OK)
        s = set_params(ctx, def, call, st->kernel, &next);
    st->dims = 1;
    st->global[0] = clrun__round_up((size_t)n, st->local[0]);
    return s;
}

/* Whether ctx's binary broadcasts take the _rows kernel where it applies (clrun__ew_rows). */
static clrun_status rows_on(clrun_context *ctx, bool *rows)
{
    clrun__core_device dev;
    clrun_status s = clrun__core_device_of(ctx, &dev);
    *rows = s == CLRUN_OK && (clrun__ew_rows > 0 || (clrun__ew_rows < 0 && dev.registers));
    return s;
}

/* The kernel of a node from its op's program (built on first use): the _rows kernels in it
 * only with `rows` (rows_on: the devices that take them), which a driver compiling its
 * programs whole would build for nothing elsewhere. */
static clrun_status library_kernel(clrun_context *ctx, const clrun__ew_def *def, clrun_dtype data,
                                   clrun_dtype result, bool rows, const char *variant, cl_kernel *out)
{
    char program_name[64], kernel_name[96];
    bool wide = clrun__lazy_driver(ctx);
    clrun__ew_library_name(def, data, result, wide, program_name, sizeof program_name);
    clrun__ew_kernel_name(def, data, result, variant, kernel_name, sizeof kernel_name);
    char *text = clrun__ew_library_source(def, data, result, wide, rows, ctx->info.fp64);
    if (text == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: kernel source", def->name);
    /* per kernel where the context builds so: an op's program holds its variants, and the
     * arithmetic family's four ops share one (a binary of the whole would compile them all) */
    cl_program program = NULL;
    clrun_status s = clrun__program_generated_ex(ctx, program_name, text, strlen(text),
                                                 CLRUN__PROGRAM_KEEP | CLRUN__PROGRAM_PER_KERNEL, &program);
    free(text);
    if (s != CLRUN_OK)
        return s;
    return clrun__program_kernel_create(ctx, program, kernel_name, out);
}

static const char *copy_kernel(clrun_dtype dtype)
{
    size_t size = clrun_dtype_size(dtype);
    return size == 1 ? "clrun_copy_u8" : size == 2 ? "clrun_copy_u16" : size == 8 ? "clrun_copy_u64"
                                                                      : "clrun_copy_u32";
}

static bool needs_fp64(const clrun__op_call *call)
{
    for (int k = 0; k < call->input_count; k++)
        if (call->inputs[k].dtype == CLRUN_F64)
            return true;
    return call->outputs[0].dtype == CLRUN_F64;
}

/* The node's state is a clrun__kernel_state: its kernel with every argument after the buffers
 * set, and its launch geometry. */
static clrun_status ew_prepare(clrun_context *ctx, const clrun__op *op, const clrun__op_call *call,
                               void **state)
{
    *state = NULL;
    const clrun__ew_def *def = clrun__ew_def_of(op);
    if (def == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED, "%s: not an elementwise op", op->name);
    if (needs_fp64(call) && !ctx->info.fp64)
        return clrun__fail(ctx, CLRUN_ERROR_UNSUPPORTED,
                           "%s: f64 needs cl_khr_fp64, which '%s' does not have", op->name, ctx->info.name);
    clrun__kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL)
        return clrun__fail(ctx, CLRUN_ERROR_OUT_OF_HOST_MEMORY, "%s: node state", op->name);
    st->inputs = (cl_uint)call->input_count;
    st->what = op->name;
    clrun_dtype data = clrun__ew_data_dtype(def, call), result = call->outputs[0].dtype;
    bool rows = false; /* the op's program holds the _rows kernels */
    clrun_status s = op->kind == CLRUN__OP_COPY ? CLRUN_OK : rows_on(ctx, &rows);
    if (s == CLRUN_OK && op->kind == CLRUN__OP_COPY) {
        s = clrun__kernel(ctx, copy_kernel(data), &st->kernel);
        if (s == CLRUN_OK)
            s = prepare_flat(ctx, NULL, call, st);
    } else if (s == CLRUN_OK && reads_own_index(call)) {
        s = library_kernel(ctx, def, data, result, rows, "", &st->kernel);
        if (s == CLRUN_OK)
            s = prepare_flat(ctx, def, call, st);
    } else if (s == CLRUN_OK) {
        ew_geometry g;
        merge_geometry(call, &g);
        /* on CPUs (a work-item runs its own loop) a row-and-constant broadcast runs its rows
         * a work-item each: vectorized, and compiled once whatever the rows' length */
        int row = rows && def->result != CLRUN__EW_CAST ? row_operand(call, &g) : -1;
        const char *variant = row >= 0 ? "_rows" : g.rank <= 3 ? "_bc" : "_bcn";
        s = library_kernel(ctx, def, data, result, rows, variant, &st->kernel);
        if (s == CLRUN_OK)
            s = row >= 0       ? prepare_rows(ctx, def, call, &g, row, st)
                : g.rank <= 3 ? prepare_broadcast3(ctx, def, call, &g, st)
                              : prepare_broadcast_n(ctx, def, call, &g, st);
    }
    return clrun__kernel_state_done(st, s, state);
}

/* ---- the entry points ------------------------------------------------------------------- */

/* Every op of an elementwise kind (unary, scale, copy, binary, ternary) runs here. */
const clrun__op_kernels clrun__elementwise_kernels = {
    .prepare = ew_prepare,
    .enqueue = clrun__kernel_state_op_enqueue,
    .release = clrun__kernel_state_release,
};
