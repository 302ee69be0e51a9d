/* One kernel's program cut out of a file of kernels (lib/device/subset.c): no device needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "device/program.h"
#include "device/subset.h"

/* The cut of text for keep, or NULL when refused; caller frees. */
static char *cut(const char *text, const char *keep)
{
    size_t length = strlen(text);
    char *out = malloc(length + 1);
    assert_non_null(out);
    if (!clrun__kernel_subset(text, length, keep, out)) {
        free(out);
        return NULL;
    }
    assert_int_equal(strlen(out), length); /* the same length */
    for (size_t i = 0; i < length; i++)    /* and the same lines */
        assert_true((text[i] == '\n') == (out[i] == '\n'));
    return out;
}

static const char file[] =
    "#define K 3\n"
    "float helper(float x) { return x * K; }\n"
    "__kernel void first(__global float *x) {\n"
    "    if (x[0] > 0) { x[0] = helper(x[0]); } /* } a brace in a comment */\n"
    "    // { another\n"
    "}\n"
    "__attribute__((reqd_work_group_size(16, 16, 1)))\n"
    "__kernel void second(__global float *x) { x[1] = 2; }\n"
    "/*\n"
    "__kernel void commented(__global float *x) { x[2] = 3; }\n"
    "*/\n"
    "__kernel\n"
    "void third(__global float *x)\n"
    "{\n"
    "    x[3] = helper(4);\n"
    "}\n";

static void other_kernels_are_blanked_helpers_kept(void **state)
{
    (void)state;
    char *out = cut(file, "second");
    assert_non_null(out);
    assert_non_null(strstr(out, "__kernel void second(__global float *x) { x[1] = 2; }"));
    assert_non_null(strstr(out, "float helper(float x)")); /* helpers and macros stay */
    assert_non_null(strstr(out, "#define K 3"));
    assert_null(strstr(out, "first"));
    assert_null(strstr(out, "third"));
    assert_non_null(strstr(out, "reqd_work_group_size")); /* its own attribute stays */
    assert_non_null(strstr(out, "commented"));             /* comments are left alone */
    free(out);

    out = cut(file, "first");
    assert_non_null(out);
    assert_non_null(strstr(out, "/* } a brace in a comment */"));
    assert_null(strstr(out, "second"));
    assert_null(strstr(out, "reqd_work_group_size")); /* second's attribute goes with it */
    assert_null(strstr(out, "third"));
    assert_null(strstr(out, "x[3]"));
    free(out);

    out = cut(file, "third"); /* `__kernel` alone on its line */
    assert_non_null(out);
    assert_non_null(strstr(out, "void third(__global float *x)"));
    assert_non_null(strstr(out, "x[3] = helper(4);"));
    assert_null(strstr(out, "x[0] = helper"));
    assert_null(strstr(out, "second"));
    free(out);
}

static void a_missing_kernel_or_an_open_body_is_refused(void **state)
{
    (void)state;
    assert_null(cut(file, "commented")); /* only in a comment */
    assert_null(cut(file, "fourth"));
    assert_null(cut(file, "secon"));     /* a prefix is not a name */
    assert_null(cut("__kernel void a(__global int *x) { x[0] = 1;\n__kernel void b(__global int *x) { }\n", "b"));
    assert_null(cut("__kernel void a(__global int *x);\n__kernel void b(__global int *x) { }\n", "b"));
}

/* Every kernel of every embedded file can be cut out: the cut declares that kernel and no other
 * of the file's, as kernels/embed.sh lists them. */
static void every_embedded_kernel_can_be_cut_out(void **state)
{
    (void)state;
    size_t cuts = 0;
    for (size_t i = 0; i < clrun__kernel_source_count; i++) {
        const clrun__kernel_source *src = &clrun__kernel_sources[i];
        for (const char *const *k = src->kernels; *k; k++) {
            char *out = cut(src->text, *k);
            if (out == NULL)
                fail_msg("kernel %s of %s not cut out", *k, src->name);
            for (const char *const *other = src->kernels; *other; other++) {
                char declared[160];
                snprintf(declared, sizeof declared, "void %s(", *other);
                bool there = strstr(out, declared) != NULL;
                if (there != (strcmp(*other, *k) == 0))
                    fail_msg("cut of %s from %s: %s %s", *k, src->name, *other, there ? "kept" : "missing");
            }
            free(out);
            cuts++;
        }
    }
    assert_true(cuts > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(other_kernels_are_blanked_helpers_kept),
        cmocka_unit_test(a_missing_kernel_or_an_open_body_is_refused),
        cmocka_unit_test(every_embedded_kernel_can_be_cut_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
