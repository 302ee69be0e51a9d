/* The model as a train step sees it: copied, with every batch norm in training mode (batch
 * statistics, running statistics updated), or as evaluation sees it (dropout off). Pure C. */
#ifndef CLRUN_LIB_GRAD_TRAIN_BN_H
#define CLRUN_LIB_GRAD_TRAIN_BN_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

/* One batch norm in training mode, as tensors of the copy. */
typedef struct clrun__train_bn {
    clrun_tensor_id output;            /* the normalised output (the node's output's name) */
    clrun_tensor_id mean, var;         /* the running statistics (constants of the model) */
    clrun_tensor_id new_mean, new_var; /* their values after this batch */
} clrun__train_bn;

/* Copies `model` into the empty graph `out` (names kept; ids change where a batch norm becomes
 * several nodes): map[t] gets the id in `out` of the model's tensor t (model->tensor_count
 * entries). In training mode every batchnorm node is rewritten, and *bns (malloc'd, *bn_count
 * entries) says where; otherwise (evaluation) every dropout is a copy of its input. */
clrun_status clrun__train_copy_model(const clrun_graph *model, clrun_graph *out, bool training,
                                     clrun_tensor_id *map, clrun__train_bn **bns, int32_t *bn_count,
                                     char *err, size_t errlen);

#endif
