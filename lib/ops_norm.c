#include "ops_internal.h"
const clrun__op *const clrun__ops_norm[] = {NULL};
