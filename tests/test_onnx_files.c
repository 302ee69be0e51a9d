/* Files a model or its data names, attacked: external data through a symbolic link (to a file
 * outside the model's folder, to a linked directory, to /proc/self/environ), a FIFO or a
 * directory where a file should be (never waited on: each test runs under an alarm, so a read
 * that blocks fails the test instead of hanging it), the same for Constant tensors and for .pb
 * test inputs with external data, and .npy / .pb readers given a device or a FIFO. Every link
 * and FIFO is made in a fresh temporary folder and removed. And host folding's budget: a model
 * of a few bytes cannot make the importer build gigabytes. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <clrun/clrun.h>

#include "onnx/tensor.h"
#include "onnx_builder.h"

enum { F32 = 1, I64 = 7 };

/* A read that blocks ends the test (SIGALRM) instead of hanging it. */
#define WATCHDOG_SECONDS 20

typedef struct folder {
    char model[64];   /* the model's folder */
    char outside[64]; /* a folder beside it, whose files must not be read */
} folder;

static void path_in(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    folder *f = calloc(1, sizeof *f);
    snprintf(f->model, sizeof f->model, "/tmp/clrun-files-XXXXXX");
    snprintf(f->outside, sizeof f->outside, "/tmp/clrun-outside-XXXXXX");
    if (!mkdtemp(f->model) || !mkdtemp(f->outside))
        return -1;
    /* the secret: 16 bytes a model must not see */
    static const float secret[4] = {11, 22, 33, 44};
    char path[160];
    path_in(path, sizeof path, f->outside, "secret.bin");
    write_file(path, secret, sizeof secret);
    *state = f;
    alarm(WATCHDOG_SECONDS);
    return 0;
}

/* Removes what a test made: the model folder's entries (one level of folders), then both folders. */
static void remove_folder(const char *dir)
{
    static const char *const names[] = {"weights.bin", "sub", "model.onnx", "input_0.pb", "x.npy",
                                        "fifo", "real", "w.bin", "link"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[160];
        path_in(path, sizeof path, dir, names[i]);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            remove_folder(path);
        } else {
            unlink(path);
        }
    }
    rmdir(dir);
}

static int teardown(void **state)
{
    folder *f = *state;
    alarm(0);
    char path[160];
    path_in(path, sizeof path, f->outside, "secret.bin");
    unlink(path);
    remove_folder(f->outside);
    remove_folder(f->model);
    free(f);
    return 0;
}

/* y = x + w, w a float[4] initializer (or a Constant node's value) in external data. */
static void build_model(onnx_builder *b, const char *location, bool constant)
{
    static const int64_t dims[1] = {4};
    ob_init(b, 13);
    ob_input(b, "x", F32, 1, dims, NULL);
    Onnx__TensorProto *w;
    if (constant) {
        w = ob_tensor(b, "w", F32, 1, dims, NULL, 0);
        Onnx__NodeProto *c = ob_node(b, "Constant", "const", "", "w");
        ob_attr_tensor(b, c, "value", w);
    } else {
        w = ob_initializer(b, "w", F32, 1, dims, NULL, 0);
    }
    ob_external(b, w, location, NULL, NULL);
    ob_node(b, "Add", "add", "x,w", "y");
    ob_output(b, "y", F32, 1, dims);
}

typedef ob_loaded loaded; /* the graph is destroyed at once where a test does not take it */

/* Loads the model from dir/model.onnx (its external data relative to dir). */
static loaded load_from(const char *dir, onnx_builder *b)
{
    loaded r = {0};
    size_t size;
    uint8_t *bytes = ob_pack(b, &size);
    char model[160];
    path_in(model, sizeof model, dir, "model.onnx");
    write_file(model, bytes, size);
    free(bytes);
    clrun_onnx_options o;
    clrun_onnx_options_init(&o);
    o.err = r.err;
    o.errlen = sizeof r.err;
    clrun_graph *g = NULL;
    r.status = clrun_graph_load_onnx(model, &o, &g);
    clrun_graph_destroy(g);
    unlink(model);
    return r;
}

static void expect_refused(loaded r, clrun_status status, const char *message)
{
    if (r.status != status || strstr(r.err, message) == NULL)
        fail_msg("expected %s with \"%s\", got %s: %s", clrun_status_name(status), message,
                 clrun_status_name(r.status), r.err);
}

static void link_to(const char *target, const char *dir, const char *name)
{
    char path[160];
    path_in(path, sizeof path, dir, name);
    assert_int_equal(symlink(target, path), 0);
}

static void test_external_data_through_a_link_is_refused(void **state)
{
    folder *f = *state;
    char secret[160];
    path_in(secret, sizeof secret, f->outside, "secret.bin");
    for (int constant = 0; constant < 2; constant++) {
        onnx_builder b;
        /* weights.bin -> a file outside the folder */
        link_to(secret, f->model, "weights.bin");
        build_model(&b, "weights.bin", constant);
        expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED,
                       "'weights.bin' is a symbolic link, which is not followed");
        ob_free(&b);
        /* a relative link that climbs out is refused the same way */
        char path[160];
        path_in(path, sizeof path, f->model, "weights.bin");
        unlink(path);
        link_to("../../etc/passwd", f->model, "weights.bin");
        build_model(&b, "weights.bin", constant);
        expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED, "is a symbolic link");
        ob_free(&b);
        unlink(path);
        /* /proc/self/environ: a link too */
        link_to("/proc/self/environ", f->model, "weights.bin");
        build_model(&b, "weights.bin", constant);
        expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED, "is a symbolic link");
        ob_free(&b);
        unlink(path);
        /* sub -> the outside folder: a linked directory */
        link_to(f->outside, f->model, "sub");
        build_model(&b, "sub/secret.bin", constant);
        expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED,
                       "'sub' is a symbolic link, which is not followed");
        ob_free(&b);
        path_in(path, sizeof path, f->model, "sub");
        unlink(path);
    }
}

static void test_external_data_inside_the_folder_still_loads(void **state)
{
    folder *f = *state;
    static const float w[4] = {1, 2, 3, 4};
    char path[160];
    path_in(path, sizeof path, f->model, "sub");
    assert_int_equal(mkdir(path, 0700), 0);
    path_in(path, sizeof path, f->model, "sub/w.bin");
    write_file(path, w, sizeof w);
    onnx_builder b;
    build_model(&b, "./sub//w.bin", false);
    loaded r = load_from(f->model, &b);
    assert_int_equal(r.status, CLRUN_OK);
    ob_free(&b);
    /* the model's folder may itself be reached through a link: the user named it */
    char linked[160];
    path_in(linked, sizeof linked, f->outside, "link");
    assert_int_equal(symlink(f->model, linked), 0);
    build_model(&b, "sub/w.bin", false);
    r = load_from(linked, &b);
    assert_int_equal(r.status, CLRUN_OK);
    ob_free(&b);
    unlink(linked);
    unlink(path);
}

static void test_external_data_that_is_not_a_regular_file(void **state)
{
    folder *f = *state;
    char path[160];
    /* a FIFO: opening it for reading would wait for a writer for ever */
    path_in(path, sizeof path, f->model, "weights.bin");
    assert_int_equal(mkfifo(path, 0600), 0);
    onnx_builder b;
    build_model(&b, "weights.bin", false);
    expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED, "is a FIFO, not a regular file");
    ob_free(&b);
    unlink(path);
    /* a directory */
    path_in(path, sizeof path, f->model, "sub");
    assert_int_equal(mkdir(path, 0700), 0);
    build_model(&b, "sub", false);
    expect_refused(load_from(f->model, &b), CLRUN_ERROR_UNSUPPORTED, "is a directory, not a regular file");
    ob_free(&b);
    /* a file that is too short for offset + length: refused before any read */
    static const float two[2] = {1, 2};
    path_in(path, sizeof path, f->model, "w.bin");
    write_file(path, two, sizeof two);
    build_model(&b, "w.bin", false);
    expect_refused(load_from(f->model, &b), CLRUN_ERROR_IO, "ends before offset 0 + 16 bytes (it has 8)");
    ob_free(&b);
}

/* A .pb test input (TensorProto) whose data is external: the same rules, relative to its folder. */
static void write_pb(const char *dir, const char *location)
{
    static const int64_t dims[1] = {4};
    onnx_builder b;
    ob_init(&b, 13);
    Onnx__TensorProto *t = ob_tensor(&b, "x", F32, 1, dims, NULL, 0);
    ob_external(&b, t, location, NULL, NULL);
    size_t size = onnx__tensor_proto__get_packed_size(t);
    uint8_t *bytes = malloc(size);
    onnx__tensor_proto__pack(t, bytes);
    char path[160];
    path_in(path, sizeof path, dir, "input_0.pb");
    write_file(path, bytes, size);
    free(bytes);
    ob_free(&b);
}

static void test_pb_inputs_follow_the_same_rules(void **state)
{
    folder *f = *state;
    char secret[160], pb[160], path[160], err[1024];
    path_in(secret, sizeof secret, f->outside, "secret.bin");
    path_in(pb, sizeof pb, f->model, "input_0.pb");
    clrun_tensor_type type;
    void *data = NULL;
    link_to(secret, f->model, "weights.bin");
    write_pb(f->model, "weights.bin");
    assert_int_equal(clrun_onnx_tensor_load(pb, &type, &data, NULL, 0, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_null(data);
    assert_non_null(strstr(err, "is a symbolic link"));
    path_in(path, sizeof path, f->model, "weights.bin");
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(clrun_onnx_tensor_load(pb, &type, &data, NULL, 0, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "is a FIFO"));
    unlink(path);
    /* the .pb file itself a FIFO, or a device: refused, not waited on or read for ever */
    unlink(pb);
    assert_int_equal(mkfifo(pb, 0600), 0);
    assert_int_equal(clrun_onnx_tensor_load(pb, &type, &data, NULL, 0, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "is a FIFO, not a regular file"));
    unlink(pb);
    assert_int_equal(clrun_onnx_tensor_load("/dev/zero", &type, &data, NULL, 0, err, sizeof err),
                     CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "/dev/zero: is a character device, not a regular file"));
}

static void test_npy_reads_regular_files_only(void **state)
{
    folder *f = *state;
    clrun_tensor_type type;
    void *data = NULL;
    char err[1024], path[160];
    assert_int_equal(clrun_npy_load("/dev/zero", &type, &data, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_null(data);
    assert_non_null(strstr(err, "/dev/zero: is a character device, not a regular file"));
    path_in(path, sizeof path, f->model, "x.npy");
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(clrun_npy_load(path, &type, &data, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "is a FIFO, not a regular file"));
    unlink(path);
    /* a header that declares more than the file holds, or a header larger than any numpy writes */
    static const char head[] = "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }";
    char file[10 + 64];
    memset(file, ' ', sizeof file);
    memcpy(file, head, sizeof head - 1);
    file[sizeof file - 1] = '\n';
    write_file(path, file, sizeof file);
    assert_int_equal(clrun_npy_load(path, &type, &data, err, sizeof err), CLRUN_ERROR_PARSE);
    assert_non_null(strstr(err, "0 bytes of data for a shape of 4000000 bytes"));
    static const char big[12] = "\x93NUMPY\x02\x00\xff\xff\xff\x7f";
    write_file(path, big, sizeof big);
    assert_int_equal(clrun_npy_load(path, &type, &data, err, sizeof err), CLRUN_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err, "a header of 2147483659 bytes"));
    unlink(path);
}

/* Writing trained initializers back into a model that cannot be read names that model. */
static void test_save_names_an_unreadable_model(void **state)
{
    folder *f = *state;
    char path[160], out[160], err[1024];
    int32_t written = -1;
    path_in(path, sizeof path, f->model, "gone.onnx");
    path_in(out, sizeof out, f->model, "out.onnx");
    assert_int_equal(clrun_onnx_save_initializers(path, out, NULL, NULL, NULL, 0, &written, err, sizeof err),
                     CLRUN_ERROR_IO);
    assert_int_equal(written, 0);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "cannot read"));
    assert_int_equal(access(out, F_OK), -1);
}

/* c = ConstantOfShape([count]) of 1.0, then `adds` Adds (a_k = a_{k-1} + c), y = x + a_last. */
static void build_folding(onnx_builder *b, int64_t count, int adds)
{
    static const int64_t one = 1;
    static const float value = 1;
    ob_init(b, 13);
    ob_input(b, "x", F32, 1, &count, NULL);
    ob_initializer(b, "shape", I64, 1, &one, &count, 8);
    Onnx__NodeProto *c = ob_node(b, "ConstantOfShape", "cos", "shape", "a0");
    ob_attr_tensor(b, c, "value", ob_tensor(b, "value", F32, 1, &one, &value, 4));
    char ins[64], out[16];
    for (int k = 1; k <= adds; k++) {
        snprintf(ins, sizeof ins, "a%d,a0", k - 1);
        snprintf(out, sizeof out, "a%d", k);
        ob_node(b, "Add", out, ins, out);
    }
    snprintf(ins, sizeof ins, "x,a%d", adds);
    ob_node(b, "Add", "y", ins, "y");
    ob_output(b, "y", F32, 1, &count);
}

static loaded load_memory(onnx_builder *b, clrun_graph **g)
{
    loaded r = ob_load(b, NULL);
    *g = r.graph;
    r.graph = NULL;
    return r;
}

/* The attack of the report: ConstantOfShape of 2^29 floats (2 GiB) and a chain of Adds folded
 * 12.6 GB before failing, and one of 2^28 + 1024 (just over 1 GiB) folded and loaded. Both are
 * refused at once now, before any of it is made. */
static void test_folding_a_huge_constant_is_refused(void **state)
{
    (void)state;
    static const int64_t counts[2] = {((int64_t)1 << 28) + 1024, (int64_t)1 << 29};
    for (int k = 0; k < 2; k++) {
        onnx_builder b;
        clrun_graph *g = NULL;
        build_folding(&b, counts[k], k ? 6 : 0);
        loaded r = load_memory(&b, &g);
        if (g)
            fail_msg("%" PRId64 " floats: loaded with %d nodes", counts[k], (int)clrun_graph_node_count(g));
        expect_refused(r, CLRUN_ERROR_UNSUPPORTED, "node 0 'cos' (ConstantOfShape, opset 13): a constant of shape");
        assert_int_equal(clrun__fold_budget_used(), 0);
        ob_free(&b);
    }
}

/* nodes of the chain loaded under a budget of `budget` bytes (the budget then restored) */
static int32_t nodes_under(uint64_t budget)
{
    onnx_builder b;
    clrun_graph *g = NULL;
    build_folding(&b, 4096, 6); /* 16 KiB a tensor */
    uint64_t old = clrun__fold_budget_set(budget);
    loaded r = load_memory(&b, &g);
    clrun__fold_budget_set(old);
    ob_free(&b);
    if (r.status != CLRUN_OK)
        fail_msg("%s", r.err);
    int32_t nodes = clrun_graph_node_count(g);
    clrun_graph_destroy(g);
    assert_int_equal(clrun__fold_budget_used(), 0); /* every byte counted is returned */
    return nodes;
}

/* Past the budget, what would be folded is left to the device: the Adds become graph nodes over
 * the constants folded so far. Under it, a folded value is freed once its last reader is
 * imported, so that a chain holds a few tensors at once, not all of them. */
static void test_folding_past_the_budget_is_left_to_the_device(void **state)
{
    (void)state;
    /* a0, then a1 needs a0, a copy of it and the result (48 KiB): a1 to a6 and y on the device */
    assert_int_equal(nodes_under(40 << 10), 7);
    /* a_k needs a0, a_{k-1}, the copy and the result (64 KiB), a_{k-1} freed after it: the
     * whole chain folds, y's Add alone reaches the device */
    assert_int_equal(nodes_under(64 << 10), 1);
    /* and with the default budget */
    assert_int_equal(nodes_under(0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_external_data_through_a_link_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_external_data_inside_the_folder_still_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_external_data_that_is_not_a_regular_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pb_inputs_follow_the_same_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_npy_reads_regular_files_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_names_an_unreadable_model, setup, teardown),
        cmocka_unit_test(test_folding_a_huge_constant_is_refused),
        cmocka_unit_test(test_folding_past_the_budget_is_left_to_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
