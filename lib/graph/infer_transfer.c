/* The transfer ops of host offload (graph/offload.h): `offload` copies a device tensor into a
 * tensor the executor keeps in host memory, `reload` copies such a tensor back into a device
 * tensor. Both are y = x bit for bit; what sets them apart is where their output lives, which
 * the schedule reads from the op (clrun__op_on_host). Pure C. */
#include <string.h>

#include "graph/op.h"

static clrun_status transfer_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                   size_t errlen, const char *name)
{
    const clrun__infer_error e = {name, err, errlen};
    clrun_status s = clrun__check_input_count(call, 1, 1, &e);
    if (s == CLRUN_OK)
        s = clrun__check_attrs(call, NULL, 0, &e);
    if (s == CLRUN_OK)
        s = clrun__check_dims(call, 0, &e);
    if (s == CLRUN_OK)
        out[0] = call->inputs[0];
    return s;
}

static clrun_status offload_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                  size_t errlen)
{
    return transfer_infer(call, out, err, errlen, "offload");
}

static clrun_status reload_infer(const clrun__op_call *call, clrun_tensor_type *out, char *err,
                                 size_t errlen)
{
    return transfer_infer(call, out, err, errlen, "reload");
}

/* Neither may write in place of its input: the two live in different memories. */
static const clrun__op op_offload = {.name = "offload", .min_inputs = 1, .max_inputs = 1,
                                     .outputs = 1, .infer = offload_infer};
static const clrun__op op_reload = {.name = "reload", .min_inputs = 1, .max_inputs = 1,
                                    .outputs = 1, .infer = reload_infer};

const clrun__op *const clrun__ops_transfer[] = {&op_offload, &op_reload, NULL};

bool clrun__op_on_host(const clrun__op *op)
{
    return op != NULL && op == &op_offload;
}
