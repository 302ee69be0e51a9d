/* What `clrun run` and `clrun plan` decide before loading a model, beside tools/model_io.h:
 * symbolic dimensions bound from the shapes of the --input files, inputs fixed as constants
 * (--const NAME=VALUE or NAME=FILE), and an --output-dir checked (and made) before any work.
 * A client of the public API only. */
#ifndef CLRUN_TOOLS_MODEL_BIND_H
#define CLRUN_TOOLS_MODEL_BIND_H

#include <stdbool.h>
#include <stddef.h>

#include <clrun/clrun.h>

#include "model_io.h"

typedef struct clrun_cli_consts {
    clrun_onnx_constant items[CLRUN_CLI_MAX_BINDINGS];
    void *data[CLRUN_CLI_MAX_BINDINGS]; /* owned */
    int count;
} clrun_cli_consts;

/* Takes argv[*i] when it is --const NAME=VALUE (a number) or NAME=FILE (.npy or .pb), reading the
 * file or the number at once. Returns 1 when taken, 0 when it is another option, and after a
 * message the exit status negated: -2 for a usage error or a malformed file, -1 for a file that
 * cannot be read. */
int clrun_cli_const_option(const char *command, int argc, char **argv, int *i, clrun_cli_consts *c);

/* Help lines for --const. */
void clrun_cli_const_help(void);

void clrun_cli_consts_free(clrun_cli_consts *c);

/* Makes DIR and its missing parents, and checks that it is a folder this process can write;
 * prints why not and returns 1, else 0. */
int clrun_cli_prepare_output_dir(const char *command, const char *dir);

/* The file --output-dir writes for an output name: every character outside [A-Za-z0-9._-]
 * becomes '_' (into buf; returns buf). */
const char *clrun_cli_output_file_name(const char *name, char *buf, size_t size);

/* Refuses, before the work, two outputs whose file names under --output-dir would be the same
 * (one would overwrite the other); prints why and returns 2, else 0. */
int clrun_cli_check_output_files(const char *command, const clrun_cli_io *io, const clrun_graph *g);

/* Loads the model as clrun_cli_load_model does, first binding the shape of every --input file
 * (unless --shape gives that input's) so that its symbolic dimensions need no --dim, and fixing
 * the --const inputs. An input both fed and fixed is a usage error. Returns the exit status. */
int clrun_cli_load_bound(const char *command, const char *path, clrun_cli_io *io,
                         const clrun_cli_consts *consts, clrun_graph **out);

#endif
