/* The one split of a batch into shares (core/share.h). */
#include "core/share.h"

#include "core/error.h"

clrun_status clrun__batch_share(int64_t batch, int32_t count, int32_t k, int64_t *first,
                                int64_t *rows)
{
    if (count < 1)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "batch share: %d devices: at "
                                "least one is needed", (int)count);
    if (k < 0 || k >= count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "batch share: share %d of %d: "
                                "out of range [0, %d)", (int)k, (int)count, (int)count);
    if (batch < count)
        return clrun__error_set(NULL, CLRUN_ERROR_INVALID_ARGUMENT, "batch share: a batch of "
                                "%lld rows is less than a row for each of the %d shares",
                                (long long)batch, (int)count);
    int64_t share = batch / count, extra = batch % count;
    if (first)
        *first = k * share + (k < extra ? k : extra);
    if (rows)
        *rows = share + (k < extra);
    return CLRUN_OK;
}
