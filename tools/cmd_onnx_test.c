/* clrun onnx-test: the ONNX backend conformance runner. Each case is a folder with model.onnx and
 * test_data_set_N/input_N.pb, output_N.pb (ONNX TensorProtos); a folder without model.onnx is
 * searched for cases. Every case is loaded, run on the chosen device under the chosen allocator
 * mode, and each output compared with the expected one: floats within atol + rtol·|expected|
 * (the backend tests' rtol 1e-3, atol 1e-7 unless given; bf16 at least rtol 2^-7, two of its
 * steps), NaN matching NaN, integers and bools
 * exactly. One line per case (PASS, FAIL with the worst element, UNSUPPORTED with the refusal),
 * then "N passed, N failed, N bad data, N unsupported"; exit status 1 if any case failed, and
 * before any work when a folder given holds no case. A case the suite itself gets wrong (its
 * expected outputs contradict its own model: the table below, each with the upstream report) that
 * fails is BAD-DATA, not FAIL; one that passes (the data fixed) is PASS. */
#include <dirent.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model_io.h"

typedef enum verdict { V_PASS, V_FAIL, V_UNSUPPORTED, V_BAD_DATA, V_COUNT } verdict;

static const char *verdict_name[] = {"PASS", "FAIL", "UNSUPPORTED", "BAD-DATA"};

/* Cases of Debian's libonnx-testdata whose expected outputs are not what their own model computes
 * under the spec, found and reported upstream: the case's folder name, and why. */
static const struct {
    const char *name;
    const char *why;
} bad_data[] = {
    {"test_adam_multiple",
     "the expected outputs were computed with Adam's epsilon 1e-2, which the model's node does not "
     "carry, so the spec's default 1e-6 applies (onnx/onnx#7749)"},
};

/* The reason the suite's data are wrong for the case in dir, or NULL. */
static const char *bad_data_reason(const char *dir)
{
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/') /* "case/" as a shell completes it */
        end--;
    size_t start = end;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    for (size_t i = 0; i < sizeof bad_data / sizeof bad_data[0]; i++)
        if (strlen(bad_data[i].name) == end - start && memcmp(dir + start, bad_data[i].name, end - start) == 0)
            return bad_data[i].why;
    return NULL;
}

typedef struct test_args {
    const char **dirs;
    int dir_count;
    const char *allocator;
    bool json;
    bool quiet;     /* lines for FAIL and UNSUPPORTED only */
    double rtol, atol;
} test_args;

typedef struct outcome {
    verdict v;
    char message[4096];
    int output;              /* FAIL with a worst element: the output, else -1 */
    uint64_t index;          /* flat index of the worst element */
    double got, expected;
} outcome;

typedef struct tensor_file {
    clrun_tensor_type type;
    void *data;
    char name[256];
} tensor_file;

static void print_help(void)
{
    printf("usage: clrun onnx-test DIR... [--allocator NAME] [--json] [--quiet] [--rtol R] [--atol A]\n\n"
           "Runs ONNX backend test cases: each DIR holds model.onnx and test_data_set_N/ with\n"
           "input_N.pb and output_N.pb, or is a folder of such cases (searched recursively).\n"
           "Prints one line per case: PASS, FAIL (the worst element: index, got, expected) or\n"
           "UNSUPPORTED (why clrun refuses it), then 'N passed, N failed, N bad data, N\n"
           "unsupported'. BAD-DATA: a case the suite itself gets wrong (its expected outputs\n"
           "contradict its model; the reason is printed) failed as expected. Exit status 1 if any\n"
           "case failed, or (before running any) if a DIR holds no case.\n\n"
           "  --allocator  a pool strategy (%s), naive or planned; default CLRUN_ALLOCATOR\n"
           "  --json       one JSON object: every case and the counts\n"
           "  --quiet      lines for cases that do not pass only\n"
           "  --rtol R     relative tolerance (default 1e-3)\n"
           "  --atol A     absolute tolerance (default 1e-7)\n",
           clrun_strategy_names());
}

static int parse_args(int argc, char **argv, test_args *a)
{
    *a = (test_args){.rtol = 1e-3, .atol = 1e-7};
    a->dirs = calloc((size_t)argc + 1, sizeof *a->dirs);
    if (a->dirs == NULL)
        return clrun_cli_usage_error("onnx-test", "out of host memory");
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--quiet") == 0) {
            a->quiet = true;
        } else if (strcmp(arg, "--allocator") == 0 && has_value) {
            a->allocator = argv[++i];
        } else if ((strcmp(arg, "--rtol") == 0 || strcmp(arg, "--atol") == 0) && has_value) {
            char *end;
            double v = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(v >= 0))
                return clrun_cli_usage_error("onnx-test", "%s takes a number >= 0, not '%s'", arg, argv[i]);
            *(arg[2] == 'r' ? &a->rtol : &a->atol) = v;
        } else if (arg[0] == '-') {
            return clrun_cli_usage_error("onnx-test", "unknown option or missing value: '%s'", arg);
        } else {
            a->dirs[a->dir_count++] = arg;
        }
    }
    if (a->dir_count == 0)
        return clrun_cli_usage_error("onnx-test", "no test folder given");
    if (a->allocator && !clrun_allocator_valid(a->allocator))
        return clrun_cli_usage_error("onnx-test", "unknown allocator '%s': valid names are %s", a->allocator,
                                     clrun_allocator_names());
    return 0;
}

/* ---- files ---- */

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s", a, b);
    return p;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of dir whose names start with prefix (all when NULL), sorted; *count of them. */
static char **list_dir(const char *dir, const char *prefix, size_t *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return NULL;
    size_t capacity = 16;
    char **names = malloc(capacity * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0))
            continue;
        if (*count == capacity) {
            char **grown = realloc(names, 2 * capacity * sizeof *names);
            if (grown == NULL)
                break;
            names = grown;
            capacity *= 2;
        }
        if ((names[*count] = strdup(e->d_name)) != NULL)
            (*count)++;
    }
    closedir(d);
    if (names)
        qsort(names, *count, sizeof *names, compare_names);
    return names;
}

static void free_list(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* input_0.pb, input_1.pb, ... (or output_) of a data set: as many as exist in sequence. */
static int read_tensors(const char *set, const char *stem, tensor_file **out, char *err, size_t errlen)
{
    int n = 0;
    *out = NULL;
    for (;; n++) {
        char file[64];
        snprintf(file, sizeof file, "%s_%d.pb", stem, n);
        char *path = join(set, file);
        if (path == NULL || !is_file(path)) {
            free(path);
            break;
        }
        tensor_file *grown = realloc(*out, (size_t)(n + 1) * sizeof **out);
        if (grown == NULL) {
            free(path);
            snprintf(err, errlen, "out of host memory");
            return -1;
        }
        *out = grown;
        tensor_file *t = &(*out)[n];
        memset(t, 0, sizeof *t);
        clrun_status s = clrun_onnx_tensor_load(path, &t->type, &t->data, t->name, sizeof t->name, err, errlen);
        free(path);
        if (s != CLRUN_OK)
            return -1 - n;
    }
    return n;
}

static void free_tensors(tensor_file *t, int n)
{
    for (int i = 0; t && i < n; i++)
        free(t[i].data);
    free(t);
}

/* ---- comparison ---- */

static double element(const clrun_tensor_type *type, const void *data, uint64_t i)
{
    const unsigned char *p = (const unsigned char *)data + i * clrun_dtype_size(type->dtype);
    switch (type->dtype) {
    case CLRUN_F32: { float v; memcpy(&v, p, 4); return v; }
    case CLRUN_F64: { double v; memcpy(&v, p, 8); return v; }
    case CLRUN_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CLRUN_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case CLRUN_BOOL: return *p;
    case CLRUN_I8: return (int8_t)*p;
    case CLRUN_U8: return *p;
    case CLRUN_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CLRUN_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case CLRUN_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case CLRUN_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case CLRUN_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        int e = (h >> 10) & 0x1F, m = h & 0x3FF;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return (h & 0x8000) ? -v : v;
    }
    case CLRUN_BF16: { /* f32's top half */
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t bits = (uint32_t)h << 16;
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    }
    return 0;
}

static bool is_float(clrun_dtype d)
{
    return d == CLRUN_F32 || d == CLRUN_F64 || d == CLRUN_F16 || d == CLRUN_BF16;
}

static bool same_shape(const clrun_tensor_type *a, const clrun_tensor_type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

/* An output of run-time length (NonMaxSuppression's when its boxes are not known at load) has
 * a fixed capacity: an i64 tensor of more rows than the test expects, every element past them
 * -1. Such an output is compared on its leading rows, as its user reads it. */
static bool padded_rows(const clrun_tensor_type *got, const void *data, const clrun_tensor_type *want)
{
    if (got->dtype != CLRUN_I64 || want->dtype != CLRUN_I64 || got->rank != want->rank || got->rank < 1 ||
        got->shape[0] <= want->shape[0])
        return false;
    for (int d = 1; d < got->rank; d++)
        if (got->shape[d] != want->shape[d])
            return false;
    const int64_t *v = data;
    for (uint64_t k = clrun_tensor_elements(want); k < clrun_tensor_elements(got); k++)
        if (v[k] != -1)
            return false;
    return true;
}

/* The suite's files of ONNX 1.12's time store a bfloat16 tensor as uint16 (its bits): such a
 * file is the bf16 value the graph has there. */
static bool bf16_bits(const clrun_tensor_type *graph, const clrun_tensor_type *file)
{
    return graph->dtype == CLRUN_BF16 && file->dtype == CLRUN_U16 && same_shape(graph, file);
}

/* Compares output i; fills o on a mismatch and returns false. */
static bool compare_output(const test_args *a, int i, const char *name, const clrun_tensor_type *got_type,
                           const void *got, const tensor_file *want_file, outcome *o)
{
    char tg[160], tw[160];
    tensor_file bits;
    const tensor_file *want = want_file;
    if (bf16_bits(got_type, &want_file->type)) {
        bits = *want_file;
        bits.type.dtype = CLRUN_BF16;
        want = &bits;
    }
    if (padded_rows(got_type, got, &want->type))
        got_type = &want->type;
    if (got_type->dtype != want->type.dtype || !same_shape(got_type, &want->type)) {
        o->v = V_FAIL;
        snprintf(o->message, sizeof o->message, "output %d '%s' is %s, expected %s", i, name,
                 clrun_cli_type_text(got_type, tg, sizeof tg), clrun_cli_type_text(&want->type, tw, sizeof tw));
        return false;
    }
    uint64_t count = clrun_tensor_elements(got_type), worst = 0;
    double worst_excess = 0;
    /* bf16 at its own resolution, as f16's 1e-3 is about two of its steps: two bf16 steps
     * (2^-7). The suite's bf16 outputs were made by truncation, clrun rounds to nearest even:
     * one step apart at most. */
    double rtol = got_type->dtype == CLRUN_BF16 && a->rtol < 1.0 / 128 ? 1.0 / 128 : a->rtol;
    bool bad = false;
    for (uint64_t k = 0; k < count; k++) {
        double g = element(got_type, got, k), w = element(&want->type, want->data, k), excess;
        if (!is_float(got_type->dtype)) { /* integers and bools: every bit */
            size_t size = clrun_dtype_size(got_type->dtype);
            excess = memcmp((const char *)got + k * size, (const char *)want->data + k * size,
                            size) == 0 ? 0 : INFINITY;
        } else if (isnan(w) || isnan(g)) {
            excess = isnan(w) && isnan(g) ? 0 : INFINITY;
        } else if (isinf(w) || isinf(g)) {
            excess = g == w ? 0 : INFINITY;
        } else {
            excess = fabs(g - w) - (a->atol + rtol * fabs(w));
        }
        if (excess > 0 && (!bad || excess > worst_excess)) {
            bad = true;
            worst_excess = excess;
            worst = k;
        }
    }
    if (!bad)
        return true;
    o->v = V_FAIL;
    o->output = i;
    o->index = worst;
    o->got = element(got_type, got, worst);
    o->expected = element(&want->type, want->data, worst);
    char index[128];
    size_t used = (size_t)snprintf(index, sizeof index, "[");
    uint64_t rest = worst;
    int64_t idx[CLRUN_MAX_DIMS];
    for (int d = got_type->rank - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rest % (uint64_t)got_type->shape[d]);
        rest /= (uint64_t)got_type->shape[d];
    }
    for (int d = 0; d < got_type->rank && used < sizeof index; d++)
        used += (size_t)snprintf(index + used, sizeof index - used, "%s%" PRId64, d ? ", " : "", idx[d]);
    if (used < sizeof index)
        snprintf(index + used, sizeof index - used, "]");
    snprintf(o->message, sizeof o->message,
             "output %d '%s' element %s (flat %" PRIu64 "): got %.9g, expected %.9g (rtol %g, atol %g)", i, name,
             index, worst, o->got, o->expected, rtol, a->atol);
    return false;
}

/* ---- one case ---- */

/* The test input called `name` (its TensorProto name), or -1. */
static int test_input(const tensor_file *inputs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (inputs[i].name[0] && strcmp(inputs[i].name, name) == 0)
            return i;
    return -1;
}

/* Loads the model as the test case needs it: inputs' symbolic dimensions bound from the test's
 * input tensors, and inputs that decide shapes (a Reshape's shape given as an input, a Trilu's k)
 * fixed to the test's values, as a user would with a constant (frozen[i] then set). */
static clrun_status load_case(const char *model, const tensor_file *inputs, int n_inputs, bool *frozen,
                              clrun_graph **g, char *err, size_t errlen)
{
    clrun_onnx_shape *shapes = calloc((size_t)n_inputs + 1, sizeof *shapes);
    clrun_onnx_constant *constants = calloc((size_t)n_inputs + 1, sizeof *constants);
    clrun_status s = shapes && constants ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    bool bind_shapes = false;
    for (int attempt = 0; s == CLRUN_OK && attempt <= n_inputs + 1; attempt++) {
        clrun_onnx_options o;
        clrun_onnx_options_init(&o);
        o.err = err;
        o.errlen = errlen;
        o.shapes = shapes;
        o.constants = constants;
        for (int i = 0; i < n_inputs; i++) {
            if (!inputs[i].name[0])
                continue;
            if (frozen[i])
                constants[o.constant_count++] = (clrun_onnx_constant){inputs[i].name, inputs[i].type, inputs[i].data};
            else if (bind_shapes) {
                clrun_onnx_shape *sh = &shapes[o.shape_count++];
                sh->input = inputs[i].name;
                sh->rank = inputs[i].type.rank;
                memcpy(sh->dims, inputs[i].type.shape, sizeof sh->dims);
            }
        }
        s = clrun_graph_load_onnx(model, &o, g);
        if (s == CLRUN_ERROR_INVALID_GRAPH && !bind_shapes && (strstr(err, "is not bound") || strstr(err, "has no size"))) {
            bind_shapes = true;
            s = CLRUN_OK;
            continue;
        }
        const char *known = s == CLRUN_ERROR_UNSUPPORTED ? strstr(err, "' must be known at load time") : NULL;
        if (known == NULL)
            break;
        const char *open = known;
        while (open > err && open[-1] != '\'')
            open--;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(known - open), open);
        int k = test_input(inputs, n_inputs, name);
        if (k >= 0 && !frozen[k]) {
            frozen[k] = true;
            s = CLRUN_OK;
            continue;
        }
        /* A value computed from inputs (a Cast of a size, say): fix the small integer inputs,
         * the ones that can decide shapes, and then the scalars (a Range's float bounds). */
        bool more = false;
        for (int pass = 0; pass < 2 && !more; pass++)
            for (int i = 0; i < n_inputs; i++) {
                clrun_dtype d = inputs[i].type.dtype;
                bool small = pass == 0 ? (d == CLRUN_I64 || d == CLRUN_I32) && clrun_tensor_elements(&inputs[i].type) <= 64
                                       : inputs[i].type.rank == 0;
                if (!frozen[i] && small)
                    frozen[i] = more = true;
            }
        if (!more)
            break;
        s = CLRUN_OK;
    }
    free(shapes);
    free(constants);
    return s;
}

/* Runs one data set on a loaded graph. */
static void run_set(const test_args *a, clrun_context *ctx, const clrun_graph *g, clrun_exec *exec,
                    const tensor_file *all_inputs, int n_all, const bool *frozen, const tensor_file *outputs,
                    int n_out, outcome *o)
{
    const clrun_tensor_id *in_ids, *out_ids;
    int32_t gi = clrun_graph_inputs(g, &in_ids), go = clrun_graph_outputs(g, &out_ids);
    /* The graph's inputs are the test's, less those fixed at load. */
    const tensor_file *inputs[256];
    int n_in = 0;
    for (int i = 0; i < n_all && n_in < 256; i++)
        if (!frozen[i])
            inputs[n_in++] = &all_inputs[i];
    if (gi != n_in || go != n_out) {
        o->v = V_UNSUPPORTED;
        snprintf(o->message, sizeof o->message, "the test gives %d input%s and %d output%s, the graph has "
                 "%d and %d", n_in, n_in == 1 ? "" : "s", n_out, n_out == 1 ? "" : "s", (int)gi, (int)go);
        return;
    }
    clrun_buffer *buffers = calloc((size_t)gi + 1, sizeof *buffers);
    clrun_status s = buffers ? CLRUN_OK : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (int32_t i = 0; s == CLRUN_OK && i < gi; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, in_ids[i]);
        char tg[160], tw[160];
        if ((t->dtype != inputs[i]->type.dtype || !same_shape(t, &inputs[i]->type)) &&
            !bf16_bits(t, &inputs[i]->type)) {
            o->v = V_UNSUPPORTED;
            snprintf(o->message, sizeof o->message, "input %d is %s in the test, %s in the graph", (int)i,
                     clrun_cli_type_text(&inputs[i]->type, tg, sizeof tg), clrun_cli_type_text(t, tw, sizeof tw));
            s = CLRUN_ERROR_INVALID_ARGUMENT;
            break;
        }
        if (clrun_tensor_empty(t))
            continue; /* an empty input takes no buffer: the zero one */
        s = clrun_alloc_ex(ctx, clrun_tensor_bytes(t), 0, clrun_graph_tensor_name(g, in_ids[i]), &buffers[i]);
        if (s == CLRUN_OK)
            s = clrun_buffer_write(ctx, &buffers[i], inputs[i]->data);
    }
    if (s == CLRUN_OK)
        s = clrun_exec_run(exec, buffers, gi);
    for (int32_t i = 0; s == CLRUN_OK && i < go; i++) {
        const clrun_tensor_type *t = clrun_graph_tensor_type(g, out_ids[i]);
        uint64_t bytes = clrun_tensor_bytes(t);
        void *host = bytes ? malloc((size_t)bytes) : NULL; /* an empty output has no bytes */
        s = host || !bytes ? clrun_exec_read_output(exec, i, host, bytes) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        bool same = s == CLRUN_OK && compare_output(a, (int)i, clrun_graph_tensor_name(g, out_ids[i]), t, host,
                                                    &outputs[i], o);
        free(host);
        if (s == CLRUN_OK && !same)
            break;
    }
    if (s != CLRUN_OK && o->v == V_PASS) {
        o->v = V_FAIL;
        snprintf(o->message, sizeof o->message, "run failed: %s", clrun_last_error(ctx));
    }
    for (int32_t i = 0; buffers && i < gi; i++)
        if (buffers[i].mem)
            clrun_free(ctx, &buffers[i]);
    free(buffers);
}

static void run_case(const test_args *a, clrun_context *ctx, const char *dir, outcome *o)
{
    memset(o, 0, sizeof *o);
    o->output = -1;
    size_t n_sets;
    char **sets = list_dir(dir, "test_data_set_", &n_sets);
    char *model = join(dir, "model.onnx");
    if (!sets || !model || n_sets == 0) {
        o->v = V_UNSUPPORTED;
        snprintf(o->message, sizeof o->message, "no test data sets");
        free_list(sets, n_sets);
        free(model);
        return;
    }
    clrun_graph *g = NULL;
    clrun_exec *exec = NULL;
    bool frozen[256] = {false};
    for (size_t k = 0; k < n_sets && o->v == V_PASS; k++) {
        char *set = join(dir, sets[k]);
        tensor_file *inputs = NULL, *outputs = NULL;
        char err[4096];
        int n_in = set ? read_tensors(set, "input", &inputs, err, sizeof err) : -1;
        int n_out = n_in >= 0 ? read_tensors(set, "output", &outputs, err, sizeof err) : 0;
        if (n_in < 0 || n_out < 0 || n_in > 256) {
            o->v = V_UNSUPPORTED;
            snprintf(o->message, sizeof o->message, "%s", n_in > 256 ? "more than 256 inputs" : err);
        }
        bool any_frozen = false;
        for (int i = 0; i < 256; i++)
            any_frozen = any_frozen || frozen[i];
        if (o->v == V_PASS && g != NULL && any_frozen) { /* fixed to another data set's values */
            clrun_exec_destroy(exec);
            clrun_graph_destroy(g);
            exec = NULL;
            g = NULL;
        }
        if (o->v == V_PASS && g == NULL) {
            clrun_status s = load_case(model, inputs, n_in, frozen, &g, err, sizeof err);
            if (s != CLRUN_OK) {
                o->v = V_UNSUPPORTED;
                snprintf(o->message, sizeof o->message, "%s", err);
            } else if ((s = clrun_exec_create(ctx, g, NULL, &exec)) != CLRUN_OK) {
                o->v = s == CLRUN_ERROR_UNSUPPORTED ? V_UNSUPPORTED : V_FAIL;
                snprintf(o->message, sizeof o->message, "executor: %s", clrun_last_error(ctx));
            }
        }
        if (o->v == V_PASS)
            run_set(a, ctx, g, exec, inputs, n_in < 0 ? 0 : n_in, frozen, outputs, n_out < 0 ? 0 : n_out, o);
        free_tensors(inputs, n_in < 0 ? -n_in - 1 : n_in);
        free_tensors(outputs, n_out < 0 ? -n_out - 1 : n_out);
        free(set);
    }
    clrun_exec_destroy(exec);
    clrun_graph_destroy(g);
    free_list(sets, n_sets);
    free(model);
}

/* ---- the walk over folders ---- */

typedef struct tally {
    int counts[V_COUNT];
    json_object *cases; /* --json */
} tally;

static void report(const test_args *a, tally *t, const char *dir, const outcome *o)
{
    t->counts[o->v]++;
    if (a->json) {
        json_object *c = json_object_new_object();
        json_object_object_add(c, "case", json_object_new_string(dir));
        json_object_object_add(c, "result", json_object_new_string(verdict_name[o->v]));
        if (o->v != V_PASS)
            json_object_object_add(c, "message", json_object_new_string(o->message));
        if ((o->v == V_FAIL || o->v == V_BAD_DATA) && o->output >= 0) {
            json_object_object_add(c, "output", json_object_new_int(o->output));
            json_object_object_add(c, "index", json_object_new_int64((int64_t)o->index));
            json_object_object_add(c, "got", json_object_new_double(o->got));
            json_object_object_add(c, "expected", json_object_new_double(o->expected));
        }
        json_object_array_add(t->cases, c);
        return;
    }
    if (a->quiet && o->v == V_PASS)
        return;
    if (o->v == V_PASS)
        printf("PASS         %s\n", dir);
    else
        printf("%-12s %s: %s\n", verdict_name[o->v], dir, o->message);
    fflush(stdout);
}

static void walk(const test_args *a, clrun_context *ctx, const char *dir, int depth, tally *t)
{
    char *model = join(dir, "model.onnx");
    if (model && is_file(model)) {
        outcome o;
        run_case(a, ctx, dir, &o);
        const char *why = o.v == V_FAIL ? bad_data_reason(dir) : NULL;
        if (why) {
            char failure[sizeof o.message];
            memcpy(failure, o.message, sizeof failure);
            snprintf(o.message, sizeof o.message, "%.1000s; %.3000s", why, failure);
            o.v = V_BAD_DATA;
        }
        report(a, t, dir, &o);
        free(model);
        return;
    }
    free(model);
    size_t n;
    char **names = depth < 6 ? list_dir(dir, NULL, &n) : NULL;
    for (size_t i = 0; names && i < n; i++) {
        char *sub = join(dir, names[i]);
        if (sub && is_dir(sub))
            walk(a, ctx, sub, depth + 1, t);
        free(sub);
    }
    if (names)
        free_list(names, n);
}

/* Whether dir is a case or holds one, as walk searches. */
static bool holds_a_case(const char *dir, int depth)
{
    char *model = join(dir, "model.onnx");
    bool found = model && is_file(model);
    free(model);
    size_t n;
    char **names = found || depth >= 6 ? NULL : list_dir(dir, NULL, &n);
    for (size_t i = 0; names && i < n && !found; i++) {
        char *sub = join(dir, names[i]);
        found = sub && is_dir(sub) && holds_a_case(sub, depth + 1);
        free(sub);
    }
    if (names)
        free_list(names, n);
    return found;
}

int clrun_cli_onnx_test(int argc, char **argv)
{
    if (clrun_cli_wants_help(argc, argv)) {
        print_help();
        return 0;
    }
    test_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        free(a.dirs);
        return rc;
    }
    for (int i = 0; i < a.dir_count; i++)
        if (!is_dir(a.dirs[i])) {
            fprintf(stderr, "clrun onnx-test: %s is not a folder\n", a.dirs[i]);
            free(a.dirs);
            return 2;
        }
    for (int i = 0; i < a.dir_count; i++)
        if (!holds_a_case(a.dirs[i], 0)) {
            fprintf(stderr, "clrun onnx-test: no test cases found in %s (a case is a folder with model.onnx)\n",
                    a.dirs[i]);
            free(a.dirs);
            return 1;
        }
    clrun_context_options copt;
    clrun_context_options_init(&copt);
    copt.allocator = a.allocator;
    clrun_context *ctx = NULL;
    if (clrun_context_create(&copt, &ctx) != CLRUN_OK) {
        fprintf(stderr, "clrun onnx-test: %s\n", clrun_last_error(NULL));
        free(a.dirs);
        return 1;
    }
    tally t = {.cases = a.json ? json_object_new_array() : NULL};
    for (int i = 0; i < a.dir_count; i++)
        walk(&a, ctx, a.dirs[i], 0, &t);
    if (a.json) {
        json_object *root = json_object_new_object();
        json_object_object_add(root, "cases", t.cases);
        json_object_object_add(root, "passed", json_object_new_int(t.counts[V_PASS]));
        json_object_object_add(root, "failed", json_object_new_int(t.counts[V_FAIL]));
        json_object_object_add(root, "bad_data", json_object_new_int(t.counts[V_BAD_DATA]));
        json_object_object_add(root, "unsupported", json_object_new_int(t.counts[V_UNSUPPORTED]));
        printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    } else {
        printf("%d passed, %d failed, %d bad data, %d unsupported\n", t.counts[V_PASS],
               t.counts[V_FAIL], t.counts[V_BAD_DATA], t.counts[V_UNSUPPORTED]);
    }
    clrun_context_destroy(ctx);
    free(a.dirs);
    return t.counts[V_FAIL] ? 1 : 0;
}
