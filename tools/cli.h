/* The clrun command-line tool: one function per subcommand, each returning the exit status
 * (0 success, 1 failure, 2 usage error or malformed input). */
#ifndef CLRUN_TOOLS_CLI_H
#define CLRUN_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/options.h>

int clrun_cli_info(int argc, char **argv);
int clrun_cli_smoke(int argc, char **argv);
int clrun_cli_run(int argc, char **argv);    /* tools/cmd_run.c */
int clrun_cli_replay(int argc, char **argv); /* tools/cmd_replay.c */
int clrun_cli_onnx_test(int argc, char **argv); /* tools/cmd_onnx_test.c */
int clrun_cli_train(int argc, char **argv); /* tools/cmd_train.c */
int clrun_cli_grad(int argc, char **argv); /* tools/cmd_grad.c */

/* Prints "clrun COMMAND: message" and a pointer to --help on stderr; returns 2. */
int clrun_cli_usage_error(const char *command, const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#include <stdbool.h>
#include <stdint.h>

#include <clrun/status.h>

/* The exit status for a failure to load an input file: 2 when the input is malformed (syntax,
 * an invalid graph, an unknown op, a size no tensor may have), 1 when it could not be read
 * (I/O, out of host memory). */
int clrun_cli_input_exit(clrun_status status);

/* The exit status for a failure to read a data file (.npy, .pb: an input, a dataset, a
 * constant): 1 when it could not be read (I/O, out of host memory), else 2: the file itself
 * must change (malformed, or a layout clrun does not take, as Fortran order). */
int clrun_cli_data_exit(clrun_status status);

/* A --devices list, "0,1,1" (device numbers as clrun info lists them, one at most 65535; one may
 * repeat) into devices, at most max of them: the count, or -1 for a malformed or longer list. */
int clrun_cli_parse_devices(const char *text, unsigned *devices, int max);

/* A whole decimal number from 0 to 2^64 - 1 into out (no sign, suffix or blank): false for
 * anything else. */
bool clrun_cli_parse_u64(const char *text, uint64_t *out);

/* The CLRUN_* variables the command line reads itself (the library's are clrun_option_get's):
 * how many, and the i-th's row as clrun_option_get fills one, its value from the environment
 * checked as the command that reads it checks it. */
size_t clrun_cli_option_count(void);
void clrun_cli_option_get(size_t i, clrun_option_info *out);

/* CLRUN_MPI_TIMEOUT's (and --mpi-timeout's) value: seconds, finite and > 0; false for any
 * other text. */
bool clrun_cli_parse_timeout(const char *text, double *out);

/* True when argv[i] is "--help" or "-h". */
int clrun_cli_wants_help(int argc, char **argv);

#endif
