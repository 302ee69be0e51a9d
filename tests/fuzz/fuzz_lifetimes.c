/* libFuzzer target for the lifetime CSV reader: any bytes must give CLRUN_OK or a status with a
 * `FILE:LINE: message`, never a crash, a leak or an unterminated message; what reads back must
 * write and read back to the same rows. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/lifetimes.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const clrun_lifetimes *list)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return;
    if (clrun_lifetimes_write(out, list->items, list->count, list->has_offsets) != CLRUN_OK)
        abort();
    fclose(out);
    FILE *in = fmemopen(text, len, "r");
    if (!in) {
        free(text);
        return;
    }
    clrun_lifetimes again = {0};
    if (clrun_lifetimes_read(in, "again.csv", &again, NULL, 0) != CLRUN_OK)
        abort();
    fclose(in);
    free(text);
    if (again.count != list->count ||
        (list->count && memcmp(again.items, list->items, list->count * sizeof *list->items) != 0))
        abort();
    clrun_lifetimes_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0; /* fmemopen of 0 bytes is not portable */
    FILE *in = fmemopen((void *)data, size, "r");
    if (!in)
        return 0;
    clrun_lifetimes list = {0};
    char err[128];
    clrun_status st = clrun_lifetimes_read(in, "fuzz.csv", &list, err, sizeof err);
    fclose(in);
    if (st == CLRUN_OK) {
        check_round_trip(&list);
    } else {
        if (list.items || list.count || memchr(err, '\0', sizeof err) == NULL ||
            strncmp(err, "fuzz.csv:", 9) != 0)
            abort();
    }
    clrun_lifetimes_free(&list);
    return 0;
}
