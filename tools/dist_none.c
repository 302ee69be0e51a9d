/* clrun train without MPI (configure found none): one process alone. */
#include <stdio.h>
#include <stdlib.h>

#include "dist.h"

bool clrun_cli_dist_built(void)
{
    return false;
}

int clrun_cli_dist_start(clrun_cli_dist *d, double timeout_s)
{
    *d = (clrun_cli_dist){.rank = 0, .size = 1, .timeout_s = timeout_s, .weight = 1.0};
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (size && atoi(size) > 1) {
        fprintf(stderr, "clrun train: started by mpirun as one of %s processes, but this clrun was "
                "built without MPI (configure --with-mpi; apt-get install libopenmpi-dev): each "
                "would train alone\n", size);
        return 2;
    }
    return 0;
}

clrun_status clrun_cli_dist_reduce(void *user, uint64_t step, float *gradients, uint64_t count,
                                   char *err, size_t errlen)
{
    (void)user, (void)step, (void)gradients, (void)count, (void)err, (void)errlen;
    return CLRUN_OK;
}

clrun_status clrun_cli_dist_bucket_start(void *user, uint64_t step, int32_t bucket,
                                         float *gradients, uint64_t count, char *err,
                                         size_t errlen)
{
    (void)user, (void)step, (void)bucket, (void)gradients, (void)count, (void)err, (void)errlen;
    return CLRUN_OK;
}

clrun_status clrun_cli_dist_bucket_test(void *user, uint64_t step, int32_t bucket, bool *done,
                                        char *err, size_t errlen)
{
    (void)user, (void)step, (void)bucket, (void)err, (void)errlen;
    *done = true;
    return CLRUN_OK;
}

const float *clrun_cli_dist_tree_sum(clrun_cli_dist *d, clrun_cli_tree *tree, int64_t chunks,
                                     const char *what, char *err, size_t errlen)
{
    (void)d, (void)chunks, (void)what, (void)err, (void)errlen;
    return clrun_cli_tree_fold(tree);
}

void clrun_cli_dist_sum(clrun_cli_dist *d, double *values, int count, const char *what)
{
    (void)d, (void)values, (void)count, (void)what;
}

void clrun_cli_dist_abort(clrun_cli_dist *d, int code)
{
    (void)d, (void)code;
}

void clrun_cli_dist_finish(clrun_cli_dist *d)
{
    (void)d;
}
