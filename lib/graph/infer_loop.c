/* The ops of a Loop run at run time (an ONNX Loop whose trip count or condition is known only
 * when it runs): `loop_begin` and `loop_end` bound the body's nodes, which the executor runs
 * once per iteration (lib/exec/exec_loop.c); `loop_carry` copies a loop-carried value into the
 * buffer the body reads (before the loop), the body's result into its own buffer (in the body)
 * and the final value out (after the loop). Pure C.
 *
 *   v_in_k = loop_carry(v_init_k)                     for each carried value
 *   iter, cond_in = loop_begin(M, cond, v_in_0, ...)  iteration number (i64) and true (bool)
 *   ... the body, every node guarded by cond_in ...
 *   count = loop_end(iter, cond_in, cond_out, co_0.., v_in_0.., outer...)  (carried = nc)
 *   final_k = loop_carry(v_in_k, count)
 *
 * loop_end reads every value from before the loop that the body reads, so that the schedule
 * keeps them (and the carried buffers) alive over every iteration.
 *
 * An ONNX Scan run per iteration adds two ops: `scan_stack` makes a zeroed tensor of the full
 * stacked shape before the loop (its input only orders it there), and `scan_put` writes each
 * iteration's scan output into slice t of it (length-1-t when reversed), in place: its output
 * is a one-element token (the iteration number) that loop_end reads, so that the writes are
 * part of the body. The stacked tensor is allocated once and read after the loop:
 *
 *   acc = scan_stack(x)                     (shape, dtype)
 *   token = scan_put(acc, y, iter)          in the body (axis, reverse)
 *   y_full = loop_carry(acc, count)         after the loop */
#include <string.h>

#include "graph/op.h"
#include "graph/types.h"

static bool one_element(const clrun_tensor_type *t)
{
    return clrun_tensor_elements(t) == 1;
}

/* The checks every loop op makes: its input count, its attributes, every input's dimensions. */
static clrun_status checked(const clrun__op_call *call, int min_inputs, int max_inputs,
                            const clrun__attr_spec *specs, int spec_count, const clrun__infer_error *e)
{
    clrun_status s = clrun__check_input_count(call, min_inputs, max_inputs, e);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, specs, spec_count, e);
    for (int i = 0; s == CLRUN_OK && i < call->input_count; i++)
        s = clrun__check_dims(call, i, e);
    return s;
}

static clrun_status begin_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err, size_t errlen)
{
    const clrun__infer_error e = {"loop_begin", err, errlen};
    clrun_status s = checked(call, 2, 64, NULL, 0, &e);
    if (s != CLRUN_OK)
        return s;
    if (call->inputs[0].dtype != CLRUN_I64 || !one_element(&call->inputs[0]))
        return clrun__refuse(&e, "the trip count (input 0) must be one i64 element");
    if (call->inputs[1].dtype != CLRUN_BOOL || !one_element(&call->inputs[1]))
        return clrun__refuse(&e, "the condition (input 1) must be one bool element");
    memset(out, 0, 2 * sizeof *out);
    out[0].dtype = CLRUN_I64;
    out[1].dtype = CLRUN_BOOL;
    return CLRUN_OK;
}

static clrun_status end_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err, size_t errlen)
{
    const clrun__infer_error e = {"loop_end", err, errlen};
    static const clrun__attr_spec specs[] = {{"carried", CLRUN__WANT_INT, true}};
    clrun_status s = checked(call, 3, 64, specs, 1, &e);
    if (s != CLRUN_OK)
        return s;
    int64_t nc = clrun__attr_int_or(call, "carried", -1);
    if (nc < 0 || 3 + 2 * nc > call->input_count)
        return clrun__refuse(&e, "carried %lld does not fit %d inputs", (long long)nc, call->input_count);
    if (call->inputs[0].dtype != CLRUN_I64 || !one_element(&call->inputs[0]))
        return clrun__refuse(&e, "the iteration number (input 0) must be one i64 element");
    for (int i = 1; i < 3; i++)
        if (call->inputs[i].dtype != CLRUN_BOOL || !one_element(&call->inputs[i]))
            return clrun__refuse(&e, "the condition (input %d) must be one bool element", i);
    for (int k = 0; k < nc; k++)
        if (!clrun__type_equal(&call->inputs[3 + k], &call->inputs[3 + nc + k]))
            return clrun__refuse(&e, "carried value %d: the body's result (input %lld) and the value it "
                                 "reads (input %lld) differ in type or shape", k, (long long)(3 + k),
                                 (long long)(3 + nc + k));
    memset(out, 0, sizeof *out);
    out[0].dtype = CLRUN_I64;
    return CLRUN_OK;
}

static clrun_status carry_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err, size_t errlen)
{
    const clrun__infer_error e = {"loop_carry", err, errlen};
    clrun_status s = checked(call, 1, 2, NULL, 0, &e);
    if (s == CLRUN_OK)
        out[0] = call->inputs[0];
    return s;
}

static clrun_status stack_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err, size_t errlen)
{
    const clrun__infer_error e = {"scan_stack", err, errlen};
    static const clrun__attr_spec specs[] = {{"shape", CLRUN__WANT_INTS, true}, {"dtype", CLRUN__WANT_INT, true}};
    clrun_status s = checked(call, 1, 1, specs, 2, &e);
    if (s != CLRUN_OK)
        return s;
    int64_t dims[CLRUN_MAX_DIMS + 1];
    int rank = clrun__attr_list(call, "shape", dims, CLRUN_MAX_DIMS + 1);
    int64_t dtype = clrun__attr_int_or(call, "dtype", -1);
    if (rank < 1 || rank > CLRUN_MAX_DIMS)
        return clrun__refuse(&e, "shape has %d dimensions (1 to %d)", rank, CLRUN_MAX_DIMS);
    memset(out, 0, sizeof *out);
    out[0].dtype = (clrun_dtype)dtype;
    if (clrun_dtype_size(out[0].dtype) == 0)
        return clrun__refuse(&e, "dtype %lld is not a tensor element type", (long long)dtype);
    out[0].rank = rank;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 1)
            return clrun__refuse(&e, "dimension %d is %lld (at least 1)", d, (long long)dims[d]);
        out[0].shape[d] = dims[d];
    }
    return CLRUN_OK;
}

static clrun_status put_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err, size_t errlen)
{
    const clrun__infer_error e = {"scan_put", err, errlen};
    static const clrun__attr_spec specs[] = {{"axis", CLRUN__WANT_INT, true}, {"reverse", CLRUN__WANT_INT, false}};
    clrun_status s = checked(call, 3, 3, specs, 2, &e);
    if (s != CLRUN_OK)
        return s;
    const clrun_tensor_type *acc = &call->inputs[0], *y = &call->inputs[1];
    int64_t axis = clrun__attr_int_or(call, "axis", -1);
    if (axis < 0 || axis >= acc->rank)
        return clrun__refuse(&e, "axis %lld is outside the stacked tensor's rank %d", (long long)axis, acc->rank);
    bool fits = acc->dtype == y->dtype && y->rank == acc->rank - 1;
    for (int d = 0, k = 0; fits && d < acc->rank; d++)
        if (d != axis)
            fits = acc->shape[d] == y->shape[k++];
    if (!fits) {
        char ta[CLRUN__TYPE_TEXT], ty[CLRUN__TYPE_TEXT];
        return clrun__refuse(&e, "%s is not a slice of %s on axis %lld", clrun__type_format(y, ty, sizeof ty),
                             clrun__type_format(acc, ta, sizeof ta), (long long)axis);
    }
    if (call->inputs[2].dtype != CLRUN_I64 || !one_element(&call->inputs[2]))
        return clrun__refuse(&e, "the iteration number (input 2) must be one i64 element");
    memset(out, 0, sizeof *out);
    out[0].dtype = CLRUN_I64;
    return CLRUN_OK;
}

/* None may write in place of an input: each output is a buffer the executor writes between
 * iterations. */
static const clrun__op op_loop_begin = {.name = "loop_begin", .min_inputs = 2, .max_inputs = 64,
                                        .outputs = 2, .infer = begin_infer};
static const clrun__op op_loop_end = {.name = "loop_end", .min_inputs = 3, .max_inputs = 64,
                                      .outputs = 1, .infer = end_infer};
static const clrun__op op_loop_carry = {.name = "loop_carry", .min_inputs = 1, .max_inputs = 2,
                                        .outputs = 1, .infer = carry_infer};

/* scan_put writes into its input 0 (the stacked tensor, from before the loop) and never in
 * place of another; its output is the token loop_end reads. */
static const clrun__op op_scan_stack = {.name = "scan_stack", .min_inputs = 1, .max_inputs = 1,
                                        .outputs = 1, .infer = stack_infer};
static const clrun__op op_scan_put = {.name = "scan_put", .min_inputs = 3, .max_inputs = 3,
                                      .outputs = 1, .infer = put_infer};

const clrun__op *const clrun__ops_loop[] = {&op_loop_begin, &op_loop_end, &op_loop_carry, &op_scan_stack,
                                            &op_scan_put, NULL};

bool clrun__op_is_loop_begin(const clrun__op *op)
{
    return op == &op_loop_begin;
}

bool clrun__op_is_loop_end(const clrun__op *op)
{
    return op == &op_loop_end;
}
