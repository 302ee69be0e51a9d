/* The dropout mask (graph/dropout_mask.h): plain C, the reference the kernel agrees with. */
#include "graph/dropout_mask.h"

#include <math.h>

#include "core/util.h"

uint64_t clrun__dropout_hash(uint64_t seed, int64_t stream, uint64_t index)
{
    return clrun__splitmix64_mix(seed + CLRUN__GOLDEN_GAMMA * ((uint64_t)stream + 1) + index);
}

uint32_t clrun__dropout_threshold(double ratio)
{
    double t = floor(ratio * 4294967296.0);
    if (!(t > 0))
        return 0;
    return t >= 4294967295.0 ? UINT32_MAX : (uint32_t)t;
}

float clrun__dropout_scale(double ratio)
{
    return (float)(1.0 / (1.0 - ratio));
}

bool clrun__dropout_keep(uint64_t seed, int64_t stream, uint64_t index, double ratio)
{
    return (uint32_t)(clrun__dropout_hash(seed, stream, index) >> 32) >=
           clrun__dropout_threshold(ratio);
}
