/* The command line's choice of pinning POCL's worker threads to CPUs (CLRUN_PIN_THREADS). */
#ifndef CLRUN_TOOLS_PIN_THREADS_H
#define CLRUN_TOOLS_PIN_THREADS_H

#include <stdbool.h>
#include <stddef.h>

/* CLRUN_PIN_THREADS's text as a choice: true for 1/true/yes/on, false for 0/false/no/off (any
 * case); returns false for any other text. */
bool clrun_cli_parse_pin(const char *text, bool *out);

/* Whether this process may run on exactly the CPUs 0 .. n - 1, every CPU the machine has (n
 * configured, n online): where POCL, asked to pin (POCL_AFFINITY), pins its worker thread i to
 * CPU i for each of its threads, one per CPU, each of those calls can succeed. */
bool clrun_cli_every_cpu(void);

/* Before the first OpenCL call: sets POCL_AFFINITY=1 in the environment when CLRUN_PIN_THREADS
 * is unset or true, POCL_AFFINITY is unset, POCL_MAX_PTHREAD_COUNT (when set)
 * asks for no more threads than there are CPUs, and clrun_cli_every_cpu() holds. 0 when done or
 * not needed; -1 for a CLRUN_PIN_THREADS that is not one of its values, `problem` then saying
 * so. The process must have one thread (setenv is not safe beside a getenv). */
int clrun_cli_pin_threads(char *problem, size_t size);

#endif
