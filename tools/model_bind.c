/* Bindings decided before a model loads: see model_bind.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "model_bind.h"

void clrun_cli_const_help(void)
{
    printf("  --const NAME=V     fixes ONNX input NAME at load as a constant: a number (converted\n"
           "                     exactly to the input's type) or a .npy/.pb file; what it decides\n"
           "                     (a branch on a sample rate, a shape) is folded\n");
}

int clrun_cli_const_option(const char *command, int argc, char **argv, int *i, clrun_cli_consts *c)
{
    if (strcmp(argv[*i], "--const") != 0)
        return 0;
    if (*i + 1 >= argc)
        return -clrun_cli_usage_error(command, "--const needs a value");
    const char *arg = argv[++*i];
    const char *eq = strrchr(arg, '=');
    if (eq == NULL || eq == arg || eq[1] == '\0')
        return -clrun_cli_usage_error(command, "--const takes NAME=NUMBER or NAME=FILE, not '%s'", arg);
    if (c->count == CLRUN_CLI_MAX_BINDINGS)
        return -clrun_cli_usage_error(command, "at most %d --const options", CLRUN_CLI_MAX_BINDINGS);
    const char *value = eq + 1;
    clrun_onnx_constant *k = &c->items[c->count];
    *k = (clrun_onnx_constant){0};
    char *end;
    errno = 0;
    double number = strtod(value, &end);
    if (*end == '\0' && errno == 0) {
        double *one = malloc(sizeof *one);
        if (one == NULL) {
            fprintf(stderr, "clrun %s: out of host memory\n", command);
            return -1;
        }
        *one = number;
        k->type = (clrun_tensor_type){.dtype = CLRUN_F64, .rank = 0};
        c->data[c->count] = one;
    } else {
        char err[2048];
        clrun_status s = clrun_cli_read_tensor(value, &k->type, &c->data[c->count], err, sizeof err);
        if (s != CLRUN_OK) {
            fprintf(stderr, "clrun %s: --const %.*s: %s\n", command, (int)(eq - arg), arg, err);
            return clrun_cli_data_exit(s) == 1 ? -1 : -2;
        }
    }
    /* NAME points into argv, cut at the '=' by a copy kept with the data. */
    size_t len = (size_t)(eq - arg);
    char *name = malloc(len + 1);
    if (name == NULL) {
        free(c->data[c->count]);
        fprintf(stderr, "clrun %s: out of host memory\n", command);
        return -1;
    }
    memcpy(name, arg, len);
    name[len] = '\0';
    for (int j = 0; j < c->count; j++)
        if (strcmp(c->items[j].input, name) == 0) {
            free(name);
            free(c->data[c->count]);
            return -clrun_cli_usage_error(command, "--const gives input '%s' twice", c->items[j].input);
        }
    k->input = name;
    k->data = c->data[c->count];
    c->count++;
    return 1;
}

void clrun_cli_consts_free(clrun_cli_consts *c)
{
    for (int i = 0; i < c->count; i++) {
        free((char *)c->items[i].input);
        free(c->data[i]);
    }
    c->count = 0;
}

int clrun_cli_prepare_output_dir(const char *command, const char *dir)
{
    if (dir == NULL)
        return 0;
    size_t len = strlen(dir);
    char *path = malloc(len + 1);
    if (path == NULL) {
        fprintf(stderr, "clrun %s: out of host memory\n", command);
        return 1;
    }
    memcpy(path, dir, len + 1);
    /* mkdir -p: each parent in turn, then the folder itself. */
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        struct stat st;
        if (stat(path, &st) != 0) {
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "clrun %s: --output-dir %s: cannot make %s: %s\n", command, dir, path,
                        strerror(errno));
                free(path);
                return 1;
            }
        } else if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "clrun %s: --output-dir %s: %s is not a folder\n", command, dir, path);
            free(path);
            return 1;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    free(path);
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "clrun %s: --output-dir %s: cannot write there: %s\n", command, dir, strerror(errno));
        return 1;
    }
    return 0;
}

static bool shape_given(const clrun_cli_io *io, const char *name)
{
    for (int i = 0; i < io->shape_count; i++)
        if (strcmp(io->shapes[i].input, name) == 0)
            return true;
    return false;
}

int clrun_cli_load_bound(const char *command, const char *path, clrun_cli_io *io,
                         const clrun_cli_consts *consts, clrun_graph **out)
{
    for (int k = 0; k < consts->count; k++)
        for (int j = 0; j < io->input_count; j++)
            if (strcmp(io->inputs[j].name, consts->items[k].input) == 0)
                return clrun_cli_usage_error(command, "input '%s' is given both by --input and by --const",
                                             io->inputs[j].name);
    if (!clrun_cli_is_onnx(path)) {
        if (consts->count) {
            fprintf(stderr, "clrun %s: --const applies to .onnx models only\n", command);
            return 2;
        }
        return clrun_cli_load_model(command, path, io, out);
    }
    /* Each fed file's shape binds its input's symbolic dimensions (the library refuses a shape
     * that disagrees with --dim, another input's shape or the model). */
    int shapes_before = io->shape_count;
    for (int j = 0; j < io->input_count; j++) {
        if (shape_given(io, io->inputs[j].name))
            continue;
        if (io->shape_count == CLRUN_CLI_MAX_BINDINGS)
            return clrun_cli_usage_error(command, "at most %d --shape and --input options together",
                                         CLRUN_CLI_MAX_BINDINGS);
        char err[2048];
        clrun_tensor_type type;
        void *data = NULL;
        clrun_status s = clrun_cli_read_tensor(io->inputs[j].path, &type, &data, err, sizeof err);
        free(data);
        if (s != CLRUN_OK) {
            fprintf(stderr, "clrun %s: %s\n", command, err);
            io->shape_count = shapes_before;
            return clrun_cli_data_exit(s);
        }
        clrun_onnx_shape *shape = &io->shapes[io->shape_count++];
        *shape = (clrun_onnx_shape){.input = io->inputs[j].name, .rank = type.rank};
        memcpy(shape->dims, type.shape, sizeof shape->dims);
    }
    char err[4096];
    clrun_onnx_options o;
    clrun_cli_onnx_options(io, err, sizeof err, &o);
    o.constants = consts->items;
    o.constant_count = consts->count;
    clrun_status s = clrun_graph_load_onnx(path, &o, out);
    io->shape_count = shapes_before;
    if (s == CLRUN_OK)
        return 0;
    /* A shape bound from a fed file for a name the model lacks: say which option named it. */
    for (int j = 0; s == CLRUN_ERROR_INVALID_ARGUMENT && j < io->input_count; j++) {
        char expect[600];
        snprintf(expect, sizeof expect, "a shape is given for '%.500s', which is not an input",
                 io->inputs[j].name);
        if (strstr(err, expect) && !shape_given(io, io->inputs[j].name)) {
            fprintf(stderr, "clrun %s: --input names '%s', which is not an input of the model\n", command,
                    io->inputs[j].name);
            return 2;
        }
    }
    if (s == CLRUN_ERROR_INVALID_ARGUMENT)
        fprintf(stderr, "clrun %s: %s\n", command, err);
    else
        fprintf(stderr, "%s\n", err);
    /* The library speaks of shapes given; say which came from a file. */
    for (int j = 0; j < io->input_count; j++) {
        char given[600];
        snprintf(given, sizeof given, "the shape given for input '%.500s'", io->inputs[j].name);
        if (strstr(err, given) && !shape_given(io, io->inputs[j].name))
            fprintf(stderr, "clrun %s: (the shape of input '%s' is that of its --input file %s)\n", command,
                    io->inputs[j].name, io->inputs[j].path);
    }
    if (strstr(err, "the `constants` load option"))
        fprintf(stderr, "clrun %s: fix an input at load with --const NAME=VALUE or --const NAME=FILE\n", command);
    if (strstr(err, "is not bound") || strstr(err, "has no size in the model") ||
        strstr(err, "has no shape in the model"))
        fprintf(stderr, "clrun %s: bind it with --dim NAME=V, --shape INPUT=AxB or --input INPUT=FILE\n",
                command);
    return s == CLRUN_ERROR_INVALID_ARGUMENT ? 2 : clrun_cli_input_exit(s);
}

const char *clrun_cli_output_file_name(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s", name);
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            *p = '_';
    return buf;
}

int clrun_cli_check_output_files(const char *command, const clrun_cli_io *io, const clrun_graph *g)
{
    if (io->output_dir == NULL)
        return 0;
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < i; j++) {
            char a[CLRUN_GRAPH_MODEL_NAME_MAX + 1], b[CLRUN_GRAPH_MODEL_NAME_MAX + 1];
            clrun_cli_output_file_name(clrun_graph_tensor_name(g, ids[i]), a, sizeof a);
            clrun_cli_output_file_name(clrun_graph_tensor_name(g, ids[j]), b, sizeof b);
            if (strcmp(a, b) == 0) {
                fprintf(stderr, "clrun %s: outputs '%s' and '%s' would both be written as %s/%s.npy\n",
                        command, clrun_graph_tensor_name(g, ids[j]), clrun_graph_tensor_name(g, ids[i]),
                        io->output_dir, a);
                return 2;
            }
        }
    return 0;
}
