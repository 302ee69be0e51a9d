/* The op definitions of each family (lib/graph/infer_*.c), collected by the registry in
 * lib/graph/op.c. */
#ifndef CLRUN_LIB_GRAPH_OP_FAMILIES_H
#define CLRUN_LIB_GRAPH_OP_FAMILIES_H

#include "graph/op.h"

extern const clrun__op *const clrun__ops_elementwise[];
extern const clrun__op *const clrun__ops_matmul[];
extern const clrun__op *const clrun__ops_norm[];
extern const clrun__op *const clrun__ops_layout[];
extern const clrun__op *const clrun__ops_transfer[]; /* infer_transfer.c */
extern const clrun__op *const clrun__ops_loop[]; /* infer_loop.c */
extern const clrun__op *const clrun__ops_conv[];
extern const clrun__op *const clrun__ops_index[];
extern const clrun__op *const clrun__ops_resize[];
extern const clrun__op *const clrun__ops_scatter[];
extern const clrun__op *const clrun__ops_sample[];
extern const clrun__op *const clrun__ops_qlinear[];
extern const clrun__op *const clrun__ops_detect[];

#endif
