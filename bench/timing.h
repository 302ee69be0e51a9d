/* What the timing benchmarks share: the median of their repeated runs (robust to the odd slow
 * one on a shared machine) and their common "[--repeat N]" argument. Header only: each
 * benchmark is one program. */
#ifndef CLRUN_BENCH_TIMING_H
#define CLRUN_BENCH_TIMING_H

#include <stdlib.h>
#include <string.h>

static int bench_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n >= 1; sorts v. */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Reads a leading "--repeat N" into *repeat (left as it is without one); returns the index of
 * the first argument after it. */
static inline int bench_repeat_arg(int argc, char **argv, int *repeat)
{
    if (argc > 2 && strcmp(argv[1], "--repeat") == 0) {
        *repeat = atoi(argv[2]);
        return 3;
    }
    return 1;
}

#endif
