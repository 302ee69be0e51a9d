/* Tests of the lifetime CSV reader and writer (clrun/lifetimes.h): what it accepts, the exact
 * `FILE:LINE: message` of every kind of malformed input, and that writing reads back. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clrun/lifetimes.h>

/* Reads `text` (of `len` bytes) as if it were the file "in.csv". */
static clrun_status read_text_len(const char *text, size_t len, clrun_lifetimes *out, char *err,
                                  size_t errlen)
{
    /* fmemopen of 0 bytes is not portable; an empty stream from tmpfile() is. */
    FILE *in = len ? fmemopen((void *)text, len, "r") : tmpfile();
    assert_non_null(in);
    clrun_status st = clrun_lifetimes_read(in, "in.csv", out, err, errlen);
    fclose(in);
    return st;
}

static clrun_status read_text(const char *text, clrun_lifetimes *out, char *err, size_t errlen)
{
    return read_text_len(text, strlen(text), out, err, errlen);
}

/* ---- what is accepted ---- */

static void reads_rows_in_file_order(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("id,lower,upper,size\n7,0,3,1024\n3,2,5,4096\n", &list, err,
                               sizeof err),
                     CLRUN_OK);
    assert_int_equal(list.count, 2);
    assert_false(list.has_offsets);
    assert_int_equal(list.items[0].id, 7);
    assert_int_equal(list.items[0].lower, 0);
    assert_int_equal(list.items[0].upper, 3);
    assert_int_equal(list.items[0].size, 1024);
    assert_int_equal(list.items[1].id, 3);
    assert_int_equal(list.items[1].size, 4096);
    clrun_lifetimes_free(&list);
}

static void accepts_crlf_and_missing_final_newline(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("id,lower,upper,size\r\n0,1,2,3\r\n4,5,6,7", &list, err, sizeof err),
                     CLRUN_OK);
    assert_int_equal(list.count, 2);
    assert_int_equal(list.items[1].size, 7);
    clrun_lifetimes_free(&list);
}

static void skips_blank_lines_but_counts_them(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("\nid,lower,upper,size\n\n0,1,2,3\n \t\n\n", &list, err, sizeof err),
                     CLRUN_OK);
    assert_int_equal(list.count, 1);
    clrun_lifetimes_free(&list);
    /* The bad row is on line 5 of the file, after two blank lines. */
    assert_int_equal(read_text("id,lower,upper,size\n\n0,1,2,3\n\nx,1,2,3\n", &list, err, sizeof err),
                     CLRUN_ERROR_PARSE);
    assert_string_equal(err, "in.csv:5: field 'id' is not an unsigned decimal integer: 'x'");
}

static void accepts_byte_order_mark_before_header(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("\xEF\xBB\xBFid,lower,upper,size\n0,1,2,3\n", &list, err, sizeof err),
                     CLRUN_OK);
    assert_int_equal(list.count, 1);
    clrun_lifetimes_free(&list);
}

static void header_without_rows_is_an_empty_list(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("id,lower,upper,size\n", &list, err, sizeof err), CLRUN_OK);
    assert_int_equal(list.count, 0);
    clrun_lifetimes_free(&list);
}

static void reads_offset_column(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("id,lower,upper,size,offset\n0,1,2,3,4096\n", &list, err, sizeof err),
                     CLRUN_OK);
    assert_true(list.has_offsets);
    assert_int_equal(list.items[0].offset, 4096);
    clrun_lifetimes_free(&list);
}

static void reads_largest_64_bit_values(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text("id,lower,upper,size\n"
                               "18446744073709551615,18446744073709551614,18446744073709551615,"
                               "18446744073709551615\n",
                               &list, err, sizeof err),
                     CLRUN_OK);
    assert_true(list.items[0].id == UINT64_MAX);
    assert_true(list.items[0].size == UINT64_MAX);
    assert_true(list.items[0].lower == UINT64_MAX - 1);
    clrun_lifetimes_free(&list);
}

static void reads_data_file_from_srcdir(void **state)
{
    (void)state;
    const char *srcdir = getenv("srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/lifetimes/small_crlf.csv", srcdir ? srcdir : ".");
    FILE *in = fopen(path, "r");
    if (!in) {
        print_message("cannot open %s (run from the top of the source tree)\n", path);
        fail();
    }
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(clrun_lifetimes_read(in, path, &list, err, sizeof err), CLRUN_OK);
    fclose(in);
    assert_int_equal(list.count, 3);
    assert_int_equal(list.items[2].lower, 4);
    assert_int_equal(list.items[2].upper, 6);
    assert_int_equal(list.items[2].size, 512);
    clrun_lifetimes_free(&list);
}

/* ---- malformed input: the exact message for each ---- */

typedef struct malformed_case {
    const char *name;     /* what is wrong, for the failure message */
    const char *text;     /* the file */
    const char *expected; /* the exact message */
} malformed_case;

static const malformed_case malformed[] = {
    {"empty file", "", "in.csv:1: empty file: expected the header 'id,lower,upper,size'"},
    {"only blank lines", "\n\r\n  \n", "in.csv:1: empty file: expected the header 'id,lower,upper,size'"},
    {"missing header", "0,1,2,3\n",
     "in.csv:1: expected the header 'id,lower,upper,size' or 'id,lower,upper,size,offset'"},
    {"wrong header", "id,start,end,size\n0,1,2,3\n",
     "in.csv:1: expected the header 'id,lower,upper,size' or 'id,lower,upper,size,offset'"},
    {"header with spaces", "id, lower, upper, size\n",
     "in.csv:1: expected the header 'id,lower,upper,size' or 'id,lower,upper,size,offset'"},
    {"too few fields", "id,lower,upper,size\n0,1,2,3\n1,2,3\n", "in.csv:3: expected 4 fields, got 3"},
    {"too many fields", "id,lower,upper,size\n0,1,2,3,4\n", "in.csv:2: expected 4 fields, got 5"},
    {"missing offset", "id,lower,upper,size,offset\n0,1,2,3\n", "in.csv:2: expected 5 fields, got 4"},
    {"empty field", "id,lower,upper,size\n0,,2,3\n", "in.csv:2: field 'lower' is empty"},
    {"trailing comma", "id,lower,upper,size\n0,1,2,\n", "in.csv:2: field 'size' is empty"},
    {"negative size", "id,lower,upper,size\n0,1,2,-5\n", "in.csv:2: field 'size' is negative: '-5'"},
    {"negative lower", "id,lower,upper,size\n0,-1,2,5\n", "in.csv:2: field 'lower' is negative: '-1'"},
    {"non-numeric", "id,lower,upper,size\n0,1,2,12kb\n",
     "in.csv:2: field 'size' is not an unsigned decimal integer: '12kb'"},
    {"plus sign", "id,lower,upper,size\n0,+1,2,5\n",
     "in.csv:2: field 'lower' is not an unsigned decimal integer: '+1'"},
    {"space in field", "id,lower,upper,size\n0,1, 2,5\n",
     "in.csv:2: field 'upper' is not an unsigned decimal integer: ' 2'"},
    {"decimal point", "id,lower,upper,size\n0,1,2,5.0\n",
     "in.csv:2: field 'size' is not an unsigned decimal integer: '5.0'"},
    {"lone minus", "id,lower,upper,size\n-,1,2,5\n",
     "in.csv:2: field 'id' is not an unsigned decimal integer: '-'"},
    {"size overflows", "id,lower,upper,size\n0,1,2,18446744073709551616\n",
     "in.csv:2: field 'size' does not fit in 64 bits: '18446744073709551616'"},
    {"upper overflows by far", "id,lower,upper,size\n0,1,99999999999999999999999,5\n",
     "in.csv:2: field 'upper' does not fit in 64 bits: '99999999999999999999999'"},
    {"offset overflows", "id,lower,upper,size,offset\n0,1,2,5,18446744073709551616\n",
     "in.csv:2: field 'offset' does not fit in 64 bits: '18446744073709551616'"},
    {"long field is cut", "id,lower,upper,size\n0,1,2,abcdefghijklmnopqrstuvwxyzABCDEFGHIJ\n",
     "in.csv:2: field 'size' is not an unsigned decimal integer: 'abcdefghijklmnopqrstuvwxyzABCDEF...'"},
    {"upper equals lower", "id,lower,upper,size\n0,4,4,5\n",
     "in.csv:2: upper (4) must be greater than lower (4)"},
    {"upper below lower", "id,lower,upper,size\n0,1,2,3\n1,9,3,5\n",
     "in.csv:3: upper (3) must be greater than lower (9)"},
    {"size zero", "id,lower,upper,size\n0,1,2,0\n", "in.csv:2: size must be greater than 0"},
    {"error after crlf rows", "id,lower,upper,size\r\n0,1,2,3\r\n0,1,2,x\r\n",
     "in.csv:3: field 'size' is not an unsigned decimal integer: 'x'"},
};

static void rejects_each_malformed_file_with_exact_message(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        clrun_lifetimes list = {0};
        char err[256] = "untouched";
        clrun_status st = read_text(malformed[i].text, &list, err, sizeof err);
        if (st != CLRUN_ERROR_PARSE || strcmp(err, malformed[i].expected) != 0) {
            print_message("case '%s': status %d, message\n  got      '%s'\n  expected '%s'\n",
                          malformed[i].name, st, err, malformed[i].expected);
            fail();
        }
        assert_null(list.items);
        assert_int_equal(list.count, 0);
    }
}

static void nul_byte_in_field_is_not_numeric(void **state)
{
    (void)state;
    static const char text[] = "id,lower,upper,size\n0,1,2,3\0\n";
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(read_text_len(text, sizeof text - 1, &list, err, sizeof err),
                     CLRUN_ERROR_PARSE);
    assert_string_equal(err, "in.csv:2: field 'size' is not an unsigned decimal integer: '3?'");
}

static void message_is_truncated_to_buffer(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    char err[8];
    assert_int_equal(read_text("id,lower,upper,size\n0,1,2,0\n", &list, err, sizeof err),
                     CLRUN_ERROR_PARSE);
    assert_string_equal(err, "in.csv:");
    /* No buffer at all is fine too. */
    assert_int_equal(read_text("id,lower,upper,size\n0,1,2,0\n", &list, NULL, 0), CLRUN_ERROR_PARSE);
}

static void null_filename_reads_as_input(void **state)
{
    (void)state;
    FILE *in = fmemopen((void *)"nope\n", 5, "r");
    assert_non_null(in);
    clrun_lifetimes list = {0};
    char err[256];
    assert_int_equal(clrun_lifetimes_read(in, NULL, &list, err, sizeof err), CLRUN_ERROR_PARSE);
    fclose(in);
    assert_int_equal(strncmp(err, "<input>:1: ", 11), 0);
}

static void null_arguments_are_rejected(void **state)
{
    (void)state;
    clrun_lifetimes list = {0};
    assert_int_equal(clrun_lifetimes_read(NULL, "x", &list, NULL, 0), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_lifetimes_push(NULL, &(clrun_lifetime){0}), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_lifetimes_write(NULL, NULL, 0, false), CLRUN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(clrun_lifetimes_write(stdout, NULL, 1, false), CLRUN_ERROR_INVALID_ARGUMENT);
}

/* ---- writer ---- */

static char *write_to_string(const clrun_lifetime *rows, size_t count, bool with_offsets)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(clrun_lifetimes_write(out, rows, count, with_offsets), CLRUN_OK);
    fclose(out);
    return text;
}

static void writes_header_and_rows(void **state)
{
    (void)state;
    const clrun_lifetime rows[] = {{.id = 1, .lower = 0, .upper = 2, .size = 64, .offset = 128}};
    char *plain = write_to_string(rows, 1, false);
    assert_string_equal(plain, "id,lower,upper,size\n1,0,2,64\n");
    free(plain);
    char *planned = write_to_string(rows, 1, true);
    assert_string_equal(planned, "id,lower,upper,size,offset\n1,0,2,64,128\n");
    free(planned);
}

static void written_rows_read_back_equal(void **state)
{
    (void)state;
    clrun_lifetime rows[200];
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < 200; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t lower = x % 1000000;
        rows[i] = (clrun_lifetime){.id = x, .lower = lower, .upper = lower + 1 + (x >> 40) % 77,
                                   .size = 1 + (x >> 20) % 123456789, .offset = x >> 3};
    }
    rows[0].size = UINT64_MAX;
    for (int with_offsets = 0; with_offsets <= 1; with_offsets++) {
        char *text = write_to_string(rows, 200, with_offsets);
        clrun_lifetimes list = {0};
        char err[256];
        assert_int_equal(read_text(text, &list, err, sizeof err), CLRUN_OK);
        free(text);
        assert_int_equal(list.count, 200);
        assert_int_equal(list.has_offsets, with_offsets);
        for (size_t i = 0; i < 200; i++) {
            assert_true(list.items[i].id == rows[i].id);
            assert_true(list.items[i].lower == rows[i].lower);
            assert_true(list.items[i].upper == rows[i].upper);
            assert_true(list.items[i].size == rows[i].size);
            assert_true(list.items[i].offset == (with_offsets ? rows[i].offset : 0));
        }
        clrun_lifetimes_free(&list);
    }
}

static void push_grows_past_initial_capacity(void **state)
{
    (void)state;
    clrun_lifetimes list;
    clrun_lifetimes_init(&list);
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(clrun_lifetimes_push(&list, &(clrun_lifetime){.id = i, .upper = 1, .size = 1}),
                         CLRUN_OK);
    assert_int_equal(list.count, 1000);
    assert_int_equal(list.items[999].id, 999);
    clrun_lifetimes_free(&list);
    assert_null(list.items);
    assert_int_equal(list.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_rows_in_file_order),
        cmocka_unit_test(accepts_crlf_and_missing_final_newline),
        cmocka_unit_test(skips_blank_lines_but_counts_them),
        cmocka_unit_test(accepts_byte_order_mark_before_header),
        cmocka_unit_test(header_without_rows_is_an_empty_list),
        cmocka_unit_test(reads_offset_column),
        cmocka_unit_test(reads_largest_64_bit_values),
        cmocka_unit_test(reads_data_file_from_srcdir),
        cmocka_unit_test(rejects_each_malformed_file_with_exact_message),
        cmocka_unit_test(nul_byte_in_field_is_not_numeric),
        cmocka_unit_test(message_is_truncated_to_buffer),
        cmocka_unit_test(null_filename_reads_as_input),
        cmocka_unit_test(null_arguments_are_rejected),
        cmocka_unit_test(writes_header_and_rows),
        cmocka_unit_test(written_rows_read_back_equal),
        cmocka_unit_test(push_grows_past_initial_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
