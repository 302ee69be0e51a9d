/* Device selection, contexts, program builds and the binary cache, on a real device. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "device/cache.h"
#include "device/cl.h"
#include "device/program.h"
#include "device_test.h"

static char cache_root[512];

static void unset_selection(void)
{
    unsetenv("CLRUN_PLATFORM");
    unsetenv("CLRUN_DEVICE");
    unsetenv("CLRUN_ALLOCATOR");
    unsetenv("CLRUN_CACHE");
}

static void device_list_has_the_two_pocl_devices(void **state)
{
    (void)state;
    clrun_device_info *list = NULL;
    size_t count = 0;
    assert_int_equal(clrun_device_list(&list, &count), CLRUN_OK);
    assert_true(count >= 2);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(list[i].device_index, i);
        assert_true(list[i].base_addr_align >= 128);
        assert_true((list[i].base_addr_align & (list[i].base_addr_align - 1)) == 0);
        assert_true(list[i].max_alloc > 0 && list[i].max_alloc <= list[i].global_mem);
        assert_true(list[i].cl_major >= 1);
        assert_true(strlen(list[i].name) > 0);
    }
    clrun_device_list_free(list);
}

static void selection_by_index_picks_that_device(void **state)
{
    (void)state;
    unset_selection();
    setenv("CLRUN_DEVICE", "1", 1);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    assert_int_equal(clrun_context_device(ctx)->device_index, 1);
    clrun_context_destroy(ctx);
}

static void selection_by_name_is_a_case_insensitive_substring(void **state)
{
    (void)state;
    unset_selection();
    clrun_device_info *list = NULL;
    size_t count = 0;
    assert_int_equal(clrun_device_list(&list, &count), CLRUN_OK);
    char upper[64] = {0};
    for (size_t i = 0; i < 6 && list[0].name[i]; i++)
        upper[i] = (char)(list[0].name[i] >= 'a' && list[0].name[i] <= 'z' ? list[0].name[i] - 32 : list[0].name[i]);
    size_t index = 99;
    assert_int_equal(clrun_device_select(list, count, NULL, upper, &index), CLRUN_OK);
    assert_int_equal(index, 0);
    clrun_device_list_free(list);

    clrun_context_options o;
    clrun_context_options_init(&o);
    o.device = upper;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    assert_int_equal(clrun_context_device(ctx)->device_index, 0);
    clrun_context_destroy(ctx);
}

static void default_is_the_first_gpu_else_the_first_device(void **state)
{
    (void)state;
    clrun_device_info list[3];
    memset(list, 0, sizeof list);
    const char *types[] = {"CPU", "GPU", "GPU"};
    for (unsigned i = 0; i < 3; i++) {
        list[i].device_index = i;
        list[i].type = types[i];
        snprintf(list[i].name, sizeof list[i].name, "dev%u", i);
    }
    size_t index = 99;
    assert_int_equal(clrun_device_select(list, 3, NULL, NULL, &index), CLRUN_OK);
    assert_int_equal(index, 1);
    list[1].type = list[2].type = "CPU";
    assert_int_equal(clrun_device_select(list, 3, NULL, "", &index), CLRUN_OK);
    assert_int_equal(index, 0);
}

static void unknown_device_fails_listing_the_devices_that_exist(void **state)
{
    (void)state;
    unset_selection();
    setenv("CLRUN_DEVICE", "no-such-accelerator", 1);
    clrun_context *ctx = (clrun_context *)&ctx;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_ERROR_NO_DEVICE);
    assert_null(ctx);
    const char *msg = clrun_last_error(NULL);
    assert_non_null(strstr(msg, "no-such-accelerator"));
    assert_non_null(strstr(msg, "devices that exist"));
    assert_non_null(strstr(msg, "0: "));
    assert_non_null(strstr(msg, "1: "));
    setenv("CLRUN_DEVICE", "7", 1);
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_ERROR_NO_DEVICE);
    assert_non_null(strstr(clrun_last_error(NULL), "CLRUN_DEVICE='7'"));
    unset_selection();
}

static void invalid_environment_fails_context_creation_with_its_name(void **state)
{
    (void)state;
    unset_selection();
    setenv("CLRUN_ALLOCATOR", "firstfit", 1);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_ERROR_INVALID_OPTION);
    assert_non_null(strstr(clrun_last_error(NULL), "CLRUN_ALLOCATOR='firstfit'"));
    unset_selection();
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.allocator = "firstfit";
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_ERROR_UNKNOWN_ALLOCATOR);
    assert_non_null(strstr(clrun_last_error(NULL), "buddy|slab|bump"));
}

static void smoke_kernel_matches_c(void **state)
{
    (void)state;
    unset_selection();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    enum { N = 4099 }; /* not a multiple of any work-group size */
    float x[N], y[N], expected[N];
    for (unsigned i = 0; i < N; i++) {
        x[i] = (float)i * 0.25f;
        y[i] = 1.0f / (float)(i + 1);
        expected[i] = 3.0f * x[i] + y[i];
    }
    cl_kernel k = NULL;
    assert_int_equal(clrun_kernel_create(ctx, "clrun_smoke_axpy", &k), CLRUN_OK);
    cl_int err;
    cl_mem dx = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_COPY_HOST_PTR, sizeof x, x, &err);
    assert_non_null(dx);
    cl_mem dy = clCreateBuffer(clrun_context_cl(ctx), CL_MEM_COPY_HOST_PTR, sizeof y, y, &err);
    assert_non_null(dy);
    float a = 3.0f;
    cl_uint n = N;
    size_t global = N;
    assert_int_equal(clSetKernelArg(k, 0, sizeof a, &a), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof dx, &dx), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 2, sizeof dy, &dy), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 3, sizeof n, &n), CL_SUCCESS);
    assert_int_equal(clEnqueueNDRangeKernel(clrun_context_queue(ctx), k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(clrun_context_queue(ctx), dy, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL), CL_SUCCESS);
    for (unsigned i = 0; i < N; i++) /* a*x+y with or without contraction: within 1 ulp */
        assert_true(y[i] == expected[i] || (double)y[i] - expected[i] < 1e-6 * (expected[i] + 1.0) ||
                    (double)expected[i] - y[i] < 1e-6 * (expected[i] + 1.0));
    clReleaseMemObject(dx);
    clReleaseMemObject(dy);
    clReleaseKernel(k);
    clrun_context_destroy(ctx);
}

/* Executors hold their context: destroying the context first leaves them running, and the
 * last clrun_exec_destroy releases it (ASan and LSan see any use after free or leak). */
static void executors_outlive_a_destroyed_context(void **state)
{
    (void)state;
    unset_selection();
    static const char text[] = "graph g\ninput x: f32[5]\nnode y = relu(x)\nnode z = add(y, x)\noutput z\n";
    clrun_graph *g = NULL;
    char err[256];
    assert_int_equal(clrun_graph_parse(text, sizeof text - 1, NULL, &g, err, sizeof err), CLRUN_OK);
    for (int order = 0; order < 2; order++) {
        clrun_context *ctx = NULL;
        assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
        clrun_exec *first = NULL, *second = NULL;
        assert_int_equal(clrun_exec_create(ctx, g, NULL, &first), CLRUN_OK);
        assert_int_equal(clrun_exec_create(ctx, g, NULL, &second), CLRUN_OK);
        const float x[5] = {-2, -1, 0, 1, 2}, want[5] = {-2, -1, 0, 2, 4};
        clrun_buffer in;
        assert_int_equal(clrun_alloc(ctx, sizeof x, &in), CLRUN_OK);
        assert_int_equal(clrun_buffer_write(ctx, &in, x), CLRUN_OK);
        clrun_context_destroy(ctx); /* deferred: two executors hold it */
        clrun_exec *runs = order ? first : second, *other = order ? second : first;
        clrun_exec_destroy(other);
        float z[5];
        assert_int_equal(clrun_exec_run(runs, &in, 1), CLRUN_OK);
        assert_int_equal(clrun_exec_read_output(runs, 0, z, sizeof z), CLRUN_OK);
        assert_memory_equal(z, want, sizeof z);
        clrun_exec_destroy(runs); /* the last: releases the context, `in` with it */
    }
    clrun_graph_destroy(g);
}

static void unknown_kernel_is_a_clear_error(void **state)
{
    (void)state;
    unset_selection();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    cl_kernel k = NULL;
    assert_int_equal(clrun_kernel_create(ctx, "clrun_no_such_kernel", &k), CLRUN_ERROR_UNKNOWN_KERNEL);
    assert_non_null(strstr(clrun_last_error(ctx), "clrun_no_such_kernel"));
    clrun_context_destroy(ctx);
}

static void failing_build_surfaces_its_build_log(void **state)
{
    (void)state;
    unset_selection();
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    static const char broken[] =
        "__kernel void broken(__global float *x) { x[0] = undeclared_identifier_xyz; }\n";
    cl_program p = NULL;
    assert_int_equal(clrun_program_build(ctx, "broken", broken, sizeof broken - 1, &p), CLRUN_ERROR_BUILD_FAILED);
    assert_null(p);
    const char *msg = clrun_last_error(ctx);
    assert_non_null(strstr(msg, "program 'broken' failed to build"));
    assert_non_null(strstr(msg, "undeclared_identifier_xyz")); /* the compiler's own words */
    clrun_context_destroy(ctx);
}

/* The one cache entry file of program `name` in dir. */
static void entry_path(const char *dir, const char *name, char *out, size_t size)
{
    char command[1024];
    snprintf(command, sizeof command, "ls %s/%s-*.bin 2>/dev/null | head -1", dir, name);
    FILE *p = popen(command, "r");
    assert_non_null(p);
    out[0] = '\0';
    if (fgets(out, (int)size, p))
        out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

static clrun_program_stats build_with(const char *dir, const char *source, int cache)
{
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.cache_dir = dir;
    o.cache = cache;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    cl_program p = NULL;
    assert_int_equal(clrun_program_build(ctx, "cached", source, strlen(source), &p), CLRUN_OK);
    cl_int err;
    cl_kernel k = clCreateKernel(p, "cached_kernel", &err); /* a loaded binary must be usable */
    assert_non_null(k);
    clReleaseKernel(k);
    clReleaseProgram(p);
    clrun_program_stats s;
    clrun_program_stats_get(ctx, &s);
    clrun_context_destroy(ctx);
    return s;
}

/* CLRUN_CACHE=1 (the option's 1): binaries are written on every driver. */
static clrun_program_stats build_once(const char *dir, const char *source)
{
    return build_with(dir, source, 1);
}

/* Rewrites the marker of program `name` in dir as another process's of the same id would have
 * it (the id alone), under its own key (after the entry's header: magic 8 bytes, key length 4,
 * little-endian). */
static void forge_marker(const char *dir, const char *name)
{
    char command[1024], path[1024];
    snprintf(command, sizeof command, "ls %s/%s-*.seen | head -1", dir, name);
    FILE *ls = popen(command, "r");
    assert_non_null(ls);
    assert_non_null(fgets(path, sizeof path, ls));
    pclose(ls);
    path[strcspn(path, "\n")] = '\0';
    unsigned char entry[4096];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t size = fread(entry, 1, sizeof entry, f);
    fclose(f);
    assert_true(size > 28);
    size_t key_length = entry[8] | (size_t)entry[9] << 8 | (size_t)entry[10] << 16 | (size_t)entry[11] << 24;
    assert_true(28 + key_length < size);
    char key[4096], pid[32], why[1024];
    memcpy(key, entry + 28, key_length);
    key[key_length] = '\0';
    int pid_length = snprintf(pid, sizeof pid, "%ld", (long)getpid());
    assert_true(clrun__cache_store(dir, path, key, (const unsigned char *)pid, (size_t)pid_length, why, sizeof why));
}

/* By default (auto) POCL gets no binary written at a program's first build from source: asking
 * it for one compiles every kernel of the program, which made the cold first run 3x slower than
 * with no cache, and its own kernel cache serves the next process. A marker remembers the build;
 * the build from source in a later process writes the binary (tests/cli_cache.sh), not another
 * context of the same process. Entries that exist are always read. */
static void auto_cache_writes_no_binaries_on_pocl(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/auto", cache_root);
    const char *source = "__kernel void cached_kernel(__global int *x) { x[get_global_id(0)] += 5; }\n";
    clrun_program_stats s = build_with(dir, source, 0);
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.cache_writes, 0);
    s = build_with(dir, source, 1); /* written when asked for */
    assert_int_equal(s.cache_writes, 1);
    s = build_with(dir, source, 0);
    assert_int_equal(s.cache_hits, 1);

    snprintf(dir, sizeof dir, "%s/second-sight", cache_root);
    for (int i = 0; i < 2; i++) { /* this process's marker: no binary */
        s = build_with(dir, source, 0);
        assert_int_equal(s.cache_misses, 1);
        assert_int_equal(s.cache_writes, 0);
    }
    char marker[1024];
    snprintf(marker, sizeof marker, "ls %s/cached-*.seen >/dev/null 2>&1", dir);
    assert_int_equal(system(marker), 0);

    /* A marker holding this process's id alone is another process's: in a container every run
     * may be process 1. */
    forge_marker(dir, "cached");
    s = build_with(dir, source, 0);
    assert_int_equal(s.cache_writes, 1);

    /* A program of two kernels gets neither a marker nor a binary on POCL (a binary would compile
     * both): no later process writes one, as before second sight. */
    snprintf(dir, sizeof dir, "%s/two-kernels", cache_root);
    const char *two = "__kernel void cached_kernel(__global int *x) { x[get_global_id(0)] += 5; }\n"
                      "__kernel void other_kernel(__global int *x) { x[get_global_id(0)] -= 5; }\n";
    for (int i = 0; i < 2; i++) {
        s = build_with(dir, two, 0);
        assert_int_equal(s.cache_writes, 0);
    }
    snprintf(marker, sizeof marker, "ls %s/cached-*.seen >/dev/null 2>&1", dir);
    assert_int_not_equal(system(marker), 0);
}

/* A per-kernel program of one kernel (POCL with a cache directory cuts such programs): its cut
 * is its whole text, and its kernel comes from a built program, not from the handle that was
 * only created; the same text asked for without the per-kernel flag is a built program too. */
static void a_one_kernel_per_kernel_program_has_its_kernel(void **state)
{
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/one-kernel", cache_root);
    clrun_context_options o;
    clrun_context_options_init(&o);
    o.cache_dir = dir;
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(&o, &ctx), CLRUN_OK);
    const char *text = "__kernel void only_kernel(__global int *x) { x[get_global_id(0)] += 7; }\n";
    cl_program deferred = NULL, built = NULL;
    assert_int_equal(clrun__program_generated_ex(ctx, "one", text, strlen(text), CLRUN__PROGRAM_PER_KERNEL,
                                                 &deferred), CLRUN_OK);
    cl_kernel k = NULL;
    assert_int_equal(clrun__program_kernel_create(ctx, deferred, "only_kernel", &k), CLRUN_OK);
    clReleaseKernel(k);
    assert_int_equal(clrun__program_generated_ex(ctx, "one", text, strlen(text), 0, &built), CLRUN_OK);
    cl_int err = CL_SUCCESS;
    k = clCreateKernel(built, "only_kernel", &err);
    assert_int_equal(err, CL_SUCCESS);
    clReleaseKernel(k);
    clrun__program_generated_release(ctx, built);
    clrun__program_generated_release(ctx, deferred);
    clrun_context_destroy(ctx);
}

/* ---- a cache another local user could have written is never read ---- */

static const char *trusted_source =
    "__kernel void cached_kernel(__global int *x) { x[get_global_id(0)] += 9; }\n";

/* A fresh cache directory under the test's root with one entry written; its path into entry. */
static void cache_with_entry(const char *name, char *dir, size_t dir_size, char *entry,
                             size_t entry_size)
{
    snprintf(dir, dir_size, "%s/%s", cache_root, name);
    clrun_program_stats s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_writes, 1);
    entry_path(dir, "cached", entry, entry_size);
    assert_true(entry[0] != '\0');
}

static void a_new_cache_directory_and_its_entries_are_private(void **state)
{
    (void)state;
    char dir[600], entry[1024];
    cache_with_entry("private", dir, sizeof dir, entry, sizeof entry);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(entry, &st), 0);
    assert_int_equal(st.st_mode & 077, 0);
}

/* A directory others may write: the cache is off (no read, no write), with a warning. */
static void a_cache_directory_others_can_write_is_not_used(void **state)
{
    (void)state;
    char dir[600], entry[1024];
    cache_with_entry("shared", dir, sizeof dir, entry, sizeof entry);
    assert_int_equal(chmod(dir, 0777), 0);
    clrun_program_stats s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_hits + s.cache_misses + s.cache_writes, 0);
    assert_int_equal(s.builds_from_source, 1);
    assert_int_equal(chmod(dir, 0700), 0);
    if (geteuid() == 0) { /* another user's directory (root can make one; CI runs as root) */
        assert_int_equal(chown(dir, 65534, 65534), 0);
        s = build_once(dir, trusted_source);
        assert_int_equal(s.cache_hits + s.cache_misses + s.cache_writes, 0);
        assert_int_equal(chown(dir, 0, 0), 0);
    }
}

/* Entries that are not this user's regular, private files are refused, rebuilt and replaced. */
static void entries_that_are_not_private_regular_files_are_refused(void **state)
{
    (void)state;
    char dir[600], entry[1024];
    cache_with_entry("entries", dir, sizeof dir, entry, sizeof entry);
    /* writable by others */
    assert_int_equal(chmod(entry, 0666), 0);
    clrun_program_stats s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_hits, 0);
    assert_int_equal(s.cache_rejected, 1);
    assert_int_equal(s.cache_writes, 1); /* replaced by our own build */
    assert_int_equal(build_once(dir, trusted_source).cache_hits, 1);
    /* a FIFO: refused at once, never waited on */
    assert_int_equal(unlink(entry), 0);
    assert_int_equal(mkfifo(entry, 0600), 0);
    s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_rejected, 1);
    /* a symbolic link to a real entry */
    char target[1100];
    snprintf(target, sizeof target, "%s.target", entry);
    assert_int_equal(rename(entry, target), 0);
    assert_int_equal(symlink(target, entry), 0);
    s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_rejected, 1);
    /* a 4 GiB sparse file: refused by its size, not read */
    assert_int_equal(unlink(entry), 0);
    int fd = open(entry, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)4 << 30), 0);
    close(fd);
    s = build_once(dir, trusted_source);
    assert_int_equal(s.cache_rejected, 1);
    assert_int_equal(s.cache_writes, 1);
    /* owned by another user (needs root to make one: CI runs as root) */
    if (geteuid() == 0) {
        assert_int_equal(chown(entry, 65534, 65534), 0);
        s = build_once(dir, trusted_source);
        assert_int_equal(s.cache_hits, 0);
        assert_int_equal(s.cache_rejected, 1);
    }
}

static void cache_goes_miss_hit_corrupt_rebuilt(void **state)
{
    (void)state;
    unset_selection();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/miss-hit", cache_root);
    const char *source = "__kernel void cached_kernel(__global int *x) { x[get_global_id(0)] += 1; }\n";

    clrun_program_stats s = build_once(dir, source);
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.builds_from_source, 1);
    assert_int_equal(s.cache_writes, 1);
    char path[1024];
    entry_path(dir, "cached", path, sizeof path);
    assert_true(path[0] != '\0');

    s = build_once(dir, source);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.builds_from_source, 0);

    /* Truncate the entry: it must be ignored and rebuilt, then hit again. */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    s = build_once(dir, source);
    assert_int_equal(s.cache_rejected, 1);
    assert_int_equal(s.builds_from_source, 1);
    assert_int_equal(s.cache_writes, 1);
    s = build_once(dir, source);
    assert_int_equal(s.cache_hits, 1);

    /* Flip a byte of the binary: the checksum catches it. */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -5, SEEK_END), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, -5, SEEK_END), 0);
    fputc(c ^ 0x5a, f);
    fclose(f);
    s = build_once(dir, source);
    assert_int_equal(s.cache_rejected, 1);
    assert_int_equal(s.builds_from_source, 1);
}

static void changed_source_is_a_different_key(void **state)
{
    (void)state;
    unset_selection();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/keys", cache_root);
    build_once(dir, "__kernel void cached_kernel(__global int *x) { x[0] = 1; }\n");
    clrun_program_stats s = build_once(dir, "__kernel void cached_kernel(__global int *x) { x[0] = 2; }\n");
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.cache_hits, 0);
}

static void unwritable_cache_is_a_warning_not_a_failure(void **state)
{
    (void)state;
    unset_selection();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/file-not-dir", cache_root);
    FILE *f = fopen(dir, "w"); /* a file where the directory should be: cannot be created */
    assert_non_null(f);
    fclose(f);
    char sub[700];
    snprintf(sub, sizeof sub, "%s/cache", dir);
    clrun_program_stats s = build_once(sub, "__kernel void cached_kernel(__global int *x) { x[0] = 3; }\n");
    assert_int_equal(s.builds_from_source, 1);
    assert_int_equal(s.cache_writes, 0);
}

static void cache_off_never_touches_the_disk(void **state)
{
    (void)state;
    unset_selection();
    setenv("CLRUN_CACHE", "0", 1);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/off", cache_root);
    setenv("CLRUN_CACHE_DIR", dir, 1);
    clrun_context *ctx = NULL;
    assert_int_equal(clrun_context_create(NULL, &ctx), CLRUN_OK);
    cl_kernel k = NULL;
    assert_int_equal(clrun_kernel_create(ctx, "clrun_smoke_axpy", &k), CLRUN_OK);
    clReleaseKernel(k);
    clrun_program_stats s;
    clrun_program_stats_get(ctx, &s);
    assert_int_equal(s.cache_misses + s.cache_hits + s.cache_writes, 0);
    clrun_context_destroy(ctx);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    setenv("CLRUN_CACHE_DIR", cache_root, 1);
    unsetenv("CLRUN_CACHE");
}

static void every_failing_opencl_call_fails_context_creation_cleanly(void **state)
{
    (void)state;
    unset_selection();
    /* Fail the 1st, 2nd, ... counted OpenCL call of context creation plus a program build until
     * one run completes without reaching the fault. LeakSanitizer (CI) checks nothing leaks. */
    for (long n = 1;; n++) {
        clrun__cl_fault_arm(n, CL_OUT_OF_RESOURCES, false);
        clrun_context *ctx = NULL;
        clrun_status status = clrun_context_create(NULL, &ctx);
        cl_kernel k = NULL;
        if (status == CLRUN_OK)
            status = clrun_kernel_create(ctx, "clrun_smoke_axpy", &k);
        bool fired = clrun__cl_fault_fired();
        clrun__cl_fault_arm(0, CL_SUCCESS, false);
        if (!fired) {
            assert_int_equal(status, CLRUN_OK);
            clReleaseKernel(k);
            clrun_context_destroy(ctx);
            assert_true(n > 10); /* creation really goes through the table */
            break;
        }
        if (status == CLRUN_OK) { /* a failure that was recovered from (e.g. cache) is fine */
            clReleaseKernel(k);
        } else {
            assert_true(strlen(clrun_last_error(ctx)) > 0);
            assert_non_null(strstr(clrun_last_error(ctx), "CL_OUT_OF_RESOURCES"));
        }
        clrun_context_destroy(ctx);
    }
}

int main(void)
{
    clrun_test_device_environment(cache_root, sizeof cache_root);
    /* the suite's environment sets no budget (tests/local.mk); the writes are tested here */
    setenv("CLRUN_CACHE_BUDGET", "1000", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_list_has_the_two_pocl_devices),
        cmocka_unit_test(selection_by_index_picks_that_device),
        cmocka_unit_test(selection_by_name_is_a_case_insensitive_substring),
        cmocka_unit_test(default_is_the_first_gpu_else_the_first_device),
        cmocka_unit_test(unknown_device_fails_listing_the_devices_that_exist),
        cmocka_unit_test(invalid_environment_fails_context_creation_with_its_name),
        cmocka_unit_test(smoke_kernel_matches_c),
        cmocka_unit_test(executors_outlive_a_destroyed_context),
        cmocka_unit_test(unknown_kernel_is_a_clear_error),
        cmocka_unit_test(failing_build_surfaces_its_build_log),
        cmocka_unit_test(cache_goes_miss_hit_corrupt_rebuilt),
        cmocka_unit_test(auto_cache_writes_no_binaries_on_pocl),
        cmocka_unit_test(a_one_kernel_per_kernel_program_has_its_kernel),
        cmocka_unit_test(a_new_cache_directory_and_its_entries_are_private),
        cmocka_unit_test(a_cache_directory_others_can_write_is_not_used),
        cmocka_unit_test(entries_that_are_not_private_regular_files_are_refused),
        cmocka_unit_test(changed_source_is_a_different_key),
        cmocka_unit_test(unwritable_cache_is_a_warning_not_a_failure),
        cmocka_unit_test(cache_off_never_touches_the_disk),
        cmocka_unit_test(every_failing_opencl_call_fails_context_creation_cleanly),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    clrun_test_remove_dir(cache_root);
    return failed;
}
