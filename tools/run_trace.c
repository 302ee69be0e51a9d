/* clrun run --trace: the last run as a Chrome/Perfetto trace (ui.perfetto.dev): a span per
 * kernel and a counter of bytes in use. */
#include <json-c/json.h>
#include <stdio.h>

#include "run.h"

int clrun_run_write_trace(const char *path, const clrun_exec *exec)
{
    const clrun_exec_span *spans;
    int32_t n = clrun_exec_profile(exec, &spans);
    json_object *events = json_object_new_array();
    for (int32_t i = 0; i < n; i++) {
        json_object *span = json_object_new_object();
        json_object_object_add(span, "name", json_object_new_string(spans[i].op));
        json_object_object_add(span, "cat", json_object_new_string("kernel"));
        json_object_object_add(span, "ph", json_object_new_string("X"));
        json_object_object_add(span, "ts", json_object_new_double((double)spans[i].start_ns / 1e3));
        json_object_object_add(span, "dur", json_object_new_double((double)(spans[i].end_ns - spans[i].start_ns) / 1e3));
        json_object_object_add(span, "pid", json_object_new_int(1));
        json_object_object_add(span, "tid", json_object_new_int(1));
        json_object *args = json_object_new_object();
        json_object_object_add(args, "output", json_object_new_string(spans[i].name));
        json_object_object_add(span, "args", args);
        json_object_array_add(events, span);

        json_object *counter = json_object_new_object();
        json_object_object_add(counter, "name", json_object_new_string("bytes in use"));
        json_object_object_add(counter, "ph", json_object_new_string("C"));
        json_object_object_add(counter, "ts", json_object_new_double((double)spans[i].start_ns / 1e3));
        json_object_object_add(counter, "pid", json_object_new_int(1));
        json_object *value = json_object_new_object();
        json_object_object_add(value, "bytes", json_object_new_int64((int64_t)spans[i].bytes_in_use));
        json_object_object_add(counter, "args", value);
        json_object_array_add(events, counter);
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "traceEvents", events);
    json_object_object_add(root, "displayTimeUnit", json_object_new_string("ms"));
    int rc = json_object_to_file_ext(path, root, JSON_C_TO_STRING_PLAIN) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "clrun run: cannot write trace '%s'\n", path);
    json_object_put(root);
    return rc;
}
