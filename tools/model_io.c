/* Models and real data for the CLI: see model_io.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model_io.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

bool clrun_cli_is_onnx(const char *path)
{
    return ends_with(path, ".onnx");
}

void clrun_cli_io_help(bool data)
{
    printf("  --dim NAME=V       a value for the symbolic dimension NAME of an ONNX model's inputs\n"
           "  --shape IN=AxBxC   the whole shape of input IN of an ONNX model ('' for a scalar)\n");
    if (data)
        printf("  --input NAME=FILE  input NAME from a .npy file or an ONNX TensorProto .pb file\n"
               "                     (others are seeded)\n"
               "  --output-dir DIR   writes every output as DIR/NAME.npy (characters outside\n"
               "                     [A-Za-z0-9._-] in NAME become _)\n");
}

/* "NAME=VALUE": the two halves (NAME in place). */
static bool split_binding(char *text, char **value)
{
    char *eq = strrchr(text, '=');
    if (eq == NULL || eq == text)
        return false;
    *eq = '\0';
    *value = eq + 1;
    return true;
}

static bool parse_dims(const char *text, clrun_onnx_shape *shape)
{
    shape->rank = 0;
    if (*text == '\0')
        return true; /* a scalar */
    const char *p = text;
    while (*p) {
        if (shape->rank == CLRUN_MAX_DIMS || *p < '0' || *p > '9')
            return false;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 1)
            return false;
        shape->dims[shape->rank++] = v;
        p = end;
        if (*p == 'x' || *p == 'X' || *p == ',')
            p++;
        else if (*p)
            return false;
    }
    return true;
}

int clrun_cli_io_option(const char *command, int argc, char **argv, int *i, clrun_cli_io *io, bool data)
{
    const char *opt = argv[*i];
    bool dim = strcmp(opt, "--dim") == 0, shape = strcmp(opt, "--shape") == 0;
    bool input = data && strcmp(opt, "--input") == 0, outdir = data && strcmp(opt, "--output-dir") == 0;
    if (!dim && !shape && !input && !outdir)
        return 0;
    if (*i + 1 >= argc)
        return clrun_cli_usage_error(command, "%s needs a value", opt);
    char *arg = argv[++*i], *value;
    if (outdir) {
        io->output_dir = arg;
        return 1;
    }
    if (!split_binding(arg, &value))
        return clrun_cli_usage_error(command, "%s takes NAME=VALUE, not '%s'", opt, arg);
    if (dim) {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || *end || end == value || v < 1)
            return clrun_cli_usage_error(command, "--dim %s= takes a size >= 1, not '%s'", arg, value);
        if (io->dim_count == CLRUN_CLI_MAX_BINDINGS)
            return clrun_cli_usage_error(command, "at most %d --dim options", CLRUN_CLI_MAX_BINDINGS);
        io->dims[io->dim_count++] = (clrun_onnx_dim){arg, v};
    } else if (shape) {
        clrun_onnx_shape s = {.input = arg};
        if (!parse_dims(value, &s))
            return clrun_cli_usage_error(command, "--shape %s= takes sizes >= 1 like 1x3x224x224 (at most "
                                         "%d), not '%s'", arg, CLRUN_MAX_DIMS, value);
        if (io->shape_count == CLRUN_CLI_MAX_BINDINGS)
            return clrun_cli_usage_error(command, "at most %d --shape options", CLRUN_CLI_MAX_BINDINGS);
        io->shapes[io->shape_count++] = s;
    } else {
        if (io->input_count == CLRUN_CLI_MAX_BINDINGS)
            return clrun_cli_usage_error(command, "at most %d --input options", CLRUN_CLI_MAX_BINDINGS);
        io->inputs[io->input_count++] = (clrun_cli_input_file){arg, value};
    }
    return 1;
}

void clrun_cli_onnx_options(const clrun_cli_io *io, char *err, size_t errlen, clrun_onnx_options *o)
{
    clrun_onnx_options_init(o);
    o->dims = io->dims;
    o->dim_count = io->dim_count;
    o->shapes = io->shapes;
    o->shape_count = io->shape_count;
    o->err = err;
    o->errlen = errlen;
}

int clrun_cli_load_model(const char *command, const char *path, const clrun_cli_io *io, clrun_graph **out)
{
    char err[4096];
    clrun_status s;
    if (clrun_cli_is_onnx(path)) {
        clrun_onnx_options o;
        clrun_cli_onnx_options(io, err, sizeof err, &o);
        s = clrun_graph_load_onnx(path, &o, out);
        if (s == CLRUN_ERROR_INVALID_ARGUMENT) {
            fprintf(stderr, "clrun %s: %s\n", command, err);
            return 2;
        }
    } else {
        if (io->dim_count || io->shape_count) {
            fprintf(stderr, "clrun %s: --dim and --shape apply to .onnx models only\n", command);
            return 2;
        }
        s = clrun_graph_load(path, out, err, sizeof err);
    }
    if (s != CLRUN_OK) {
        fprintf(stderr, "%s\n", err);
        return clrun_cli_input_exit(s);
    }
    return 0;
}

const char *clrun_cli_type_text(const clrun_tensor_type *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s[", clrun_dtype_name(t->dtype));
    for (int d = 0; d < t->rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", t->shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

clrun_status clrun_cli_read_tensor(const char *path, clrun_tensor_type *type, void **data, char *err,
                                   size_t errlen)
{
    if (!ends_with(path, ".pb"))
        return clrun_npy_load(path, type, data, err, errlen);
    clrun_status s = clrun_onnx_tensor_load(path, type, data, NULL, 0, err, errlen);
    if (s == CLRUN_OK && *data == NULL && clrun_tensor_empty(type) && (*data = malloc(1)) == NULL) {
        snprintf(err, errlen, "%s: out of host memory", path); /* an empty tensor: 0 bytes */
        s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    }
    return s;
}

/* The graph input called `name` (its clrun name, or an ONNX name that maps to it), or -1. */
static int32_t find_input(const clrun_graph *g, const char *name)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    char mapped[CLRUN_ONNX_NAME_MAX + 2];
    clrun_onnx_name(name, mapped, sizeof mapped);
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < n; i++)
            if (strcmp(clrun_graph_tensor_name(g, ids[i]), pass ? mapped : name) == 0)
                return i;
    return -1;
}

static bool same_type(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

int clrun_cli_io_bind(const char *command, clrun_cli_io *io, const clrun_graph *g)
{
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_inputs(g, &ids);
    io->host = calloc((size_t)n + 1, sizeof *io->host);
    io->host_count = n;
    if (io->host == NULL) {
        fprintf(stderr, "clrun %s: out of host memory\n", command);
        return 1;
    }
    for (int k = 0; k < io->input_count; k++) {
        const clrun_cli_input_file *f = &io->inputs[k];
        int32_t i = find_input(g, f->name);
        if (i < 0) {
            fprintf(stderr, "clrun %s: --input names '%s', which is not an input of the graph (inputs:",
                    command, f->name);
            for (int32_t j = 0; j < n; j++)
                fprintf(stderr, " %s", clrun_graph_tensor_name(g, ids[j]));
            fprintf(stderr, ")\n");
            return 2;
        }
        if (io->host[i]) {
            fprintf(stderr, "clrun %s: input '%s' is given twice\n", command, f->name);
            return 2;
        }
        char err[2048], want[160], got[160];
        clrun_tensor_type type;
        clrun_status s = clrun_cli_read_tensor(f->path, &type, &io->host[i], err, sizeof err);
        if (s != CLRUN_OK) {
            fprintf(stderr, "clrun %s: %s\n", command, err);
            return clrun_cli_data_exit(s);
        }
        const clrun_tensor_type *expected = clrun_graph_tensor_type(g, ids[i]);
        if (!same_type(&type, expected)) {
            fprintf(stderr, "clrun %s: %s holds %s, but input '%s' is %s\n", command, f->path,
                    clrun_cli_type_text(&type, got, sizeof got), f->name,
                    clrun_cli_type_text(expected, want, sizeof want));
            return 2;
        }
    }
    return 0;
}

const void *clrun_cli_io_input(const clrun_cli_io *io, int32_t index)
{
    return io->host && index < io->host_count ? io->host[index] : NULL;
}

static clrun_status read_exec_output(void *source, int32_t index, void *host, uint64_t bytes)
{
    return clrun_exec_read_output(source, index, host, bytes);
}

int clrun_cli_io_write_outputs(const char *command, const clrun_cli_io *io, clrun_exec *exec,
                               const clrun_graph *g)
{
    return clrun_cli_io_write_outputs_from(command, io, g, read_exec_output, exec);
}

int clrun_cli_io_write_outputs_from(const char *command, const clrun_cli_io *io, const clrun_graph *g,
                                    clrun_cli_output_reader reader, void *source)
{
    if (io->output_dir == NULL)
        return 0;
    if (mkdir(io->output_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "clrun %s: cannot make %s: %s\n", command, io->output_dir, strerror(errno));
        return 1;
    }
    const clrun_tensor_id *ids;
    int32_t n = clrun_graph_outputs(g, &ids);
    for (int32_t i = 0; i < n; i++) {
        const clrun_tensor_type *type = clrun_graph_tensor_type(g, ids[i]);
        uint64_t bytes = clrun_tensor_bytes(type);
        void *host = malloc((size_t)bytes + 1); /* + 1: an empty output has 0 bytes */
        char name[CLRUN_ONNX_NAME_MAX + 8], err[2048];
        snprintf(name, sizeof name, "%s", clrun_graph_tensor_name(g, ids[i]));
        for (char *p = name; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                  *p == '.' || *p == '_' || *p == '-'))
                *p = '_';
        size_t plen = strlen(io->output_dir) + strlen(name) + 6;
        char *path = malloc(plen);
        clrun_status s = host && path ? reader(source, i, host, bytes) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        if (s == CLRUN_OK) {
            snprintf(path, plen, "%s/%s.npy", io->output_dir, name);
            s = clrun_npy_save(path, type, host, err, sizeof err);
            if (s != CLRUN_OK)
                fprintf(stderr, "clrun %s: %s\n", command, err);
        } else {
            fprintf(stderr, "clrun %s: output '%s': %s\n", command, name, clrun_strerror(s));
        }
        free(host);
        free(path);
        if (s != CLRUN_OK)
            return 1;
    }
    return 0;
}

void clrun_cli_io_free(clrun_cli_io *io)
{
    for (int32_t i = 0; io->host && i < io->host_count; i++)
        free(io->host[i]);
    free(io->host);
    io->host = NULL;
    io->host_count = 0;
}
