/* clrun info: platforms, devices and the one a context would choose; --env lists CLRUN_*. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "cli.h"

static void print_help(void)
{
    printf("usage: clrun info [--json] [--env]\n\n"
           "Lists every OpenCL platform and device with what clrun records of it, and marks with '*'\n"
           "the device a context would choose (CLRUN_PLATFORM, CLRUN_DEVICE; default: the first GPU,\n"
           "else the first device).\n\n"
           "  --json   one JSON object: {\"selected\": N, \"devices\": [...]}\n"
           "  --env    list the CLRUN_* environment variables, their values and defaults\n");
}

/* The i-th CLRUN_* variable: the library's, then the command line's own. */
static size_t env_count(void) { return clrun_option_count() + clrun_cli_option_count(); }

static void env_row(size_t i, clrun_option_info *d)
{
    if (i < clrun_option_count())
        clrun_option_get(i, d);
    else
        clrun_cli_option_get(i - clrun_option_count(), d);
}

/* Every CLRUN_* variable with its current value; an invalid one is flagged with the reason,
 * and makes the exit status 1. */
static int print_env(void)
{
    int invalid = 0;
    /* Columns as wide as their longest entry, so that every row lines up. */
    int wname = (int)strlen("variable"), waccepted = (int)strlen("accepted"), wdefault = (int)strlen("default");
    for (size_t i = 0; i < env_count(); i++) {
        clrun_option_info d;
        env_row(i, &d);
        wname = (int)strlen(d.name) > wname ? (int)strlen(d.name) : wname;
        waccepted = (int)strlen(d.accepted) > waccepted ? (int)strlen(d.accepted) : waccepted;
        wdefault = (int)strlen(d.fallback) > wdefault ? (int)strlen(d.fallback) : wdefault;
    }
    printf("%-*s  %-*s  %-*s  %s\n", wname, "variable", waccepted, "accepted", wdefault, "default", "current");
    for (size_t i = 0; i < env_count(); i++) {
        clrun_option_info d;
        env_row(i, &d);
        printf("%-*s  %-*s  %-*s  %s%s\n", wname, d.name, waccepted, d.accepted, wdefault,
               d.fallback[0] ? d.fallback : "-", d.value ? d.value : "(unset)", d.valid ? "" : "  (invalid)");
        printf("    %s\n", d.help);
        if (!d.valid) {
            fprintf(stderr, "clrun info: %s\n", d.problem);
            invalid = 1;
        }
    }
    return invalid;
}

/* Says on stderr what is wrong with each invalid CLRUN_* variable; true when all are valid. */
static bool check_env(void)
{
    bool valid = true;
    for (size_t i = 0; i < env_count(); i++) {
        clrun_option_info d;
        env_row(i, &d);
        if (!d.valid) {
            fprintf(stderr, "clrun info: %s\n", d.problem);
            valid = false;
        }
    }
    return valid;
}

static void print_device(const clrun_device_info *d, int selected)
{
    char global[32], max_alloc[32], local[32];
    printf("  %s device %u: %s\n", selected ? "*" : " ", d->device_index, d->name);
    printf("      type %s, vendor %s\n", d->type, d->vendor);
    printf("      %s, driver %s, %s\n", d->version, d->driver_version, d->c_version);
    printf("      global memory %s, max allocation %s, local memory %s\n",
           clrun_format_bytes(d->global_mem, global, sizeof global),
           clrun_format_bytes(d->max_alloc, max_alloc, sizeof max_alloc),
           clrun_format_bytes(d->local_mem, local, sizeof local));
    printf("      sub-buffer alignment %llu B, %u compute units, work-group up to %zu\n",
           (unsigned long long)d->base_addr_align, d->compute_units, d->max_work_group);
    printf("      profiling %s, out-of-order queues %s, fp16 %s, fp64 %s\n", d->profiling ? "yes" : "no",
           d->out_of_order ? "yes" : "no", d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no");
}

static json_object *device_json(const clrun_device_info *d, int selected)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "index", json_object_new_int((int)d->device_index));
    json_object_object_add(o, "platform_index", json_object_new_int((int)d->platform_index));
    json_object_object_add(o, "platform", json_object_new_string(d->platform_name));
    json_object_object_add(o, "name", json_object_new_string(d->name));
    json_object_object_add(o, "vendor", json_object_new_string(d->vendor));
    json_object_object_add(o, "type", json_object_new_string(d->type));
    json_object_object_add(o, "version", json_object_new_string(d->version));
    json_object_object_add(o, "driver_version", json_object_new_string(d->driver_version));
    json_object_object_add(o, "opencl_c_version", json_object_new_string(d->c_version));
    json_object_object_add(o, "global_mem_bytes", json_object_new_int64((int64_t)d->global_mem));
    json_object_object_add(o, "max_alloc_bytes", json_object_new_int64((int64_t)d->max_alloc));
    json_object_object_add(o, "local_mem_bytes", json_object_new_int64((int64_t)d->local_mem));
    json_object_object_add(o, "base_addr_align_bytes", json_object_new_int64((int64_t)d->base_addr_align));
    json_object_object_add(o, "compute_units", json_object_new_int((int)d->compute_units));
    json_object_object_add(o, "profiling", json_object_new_boolean(d->profiling));
    json_object_object_add(o, "out_of_order", json_object_new_boolean(d->out_of_order));
    json_object_object_add(o, "fp16", json_object_new_boolean(d->fp16));
    json_object_object_add(o, "fp64", json_object_new_boolean(d->fp64));
    json_object_object_add(o, "selected", json_object_new_boolean(selected));
    return o;
}

int clrun_cli_info(int argc, char **argv)
{
    int json = 0, env = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--env") == 0) {
            env = 1;
        } else {
            return clrun_cli_usage_error("info", "unknown option '%s'", argv[i]);
        }
    }
    if (env)
        return print_env();
    /* The devices are listed whatever the settings say; every invalid setting is flagged and
     * makes the exit status 1, as a selector that matches no device does. */
    bool settings_valid = check_env();
    clrun_device_info *list = NULL;
    size_t count = 0, chosen = (size_t)-1;
    if (clrun_device_list(&list, &count) != CLRUN_OK) {
        fprintf(stderr, "clrun info: %s\n", clrun_last_error(NULL));
        return 1;
    }
    clrun_status selection = clrun_device_select(list, count, getenv("CLRUN_PLATFORM"),
                                                 getenv("CLRUN_DEVICE"), &chosen);
    if (json) {
        json_object *root = json_object_new_object();
        json_object *devices = json_object_new_array();
        for (size_t i = 0; i < count; i++)
            json_object_array_add(devices, device_json(&list[i], i == chosen));
        json_object_object_add(root, "version", json_object_new_string(clrun_version()));
        json_object_object_add(root, "selected", selection == CLRUN_OK ? json_object_new_int((int)chosen) : NULL);
        json_object_object_add(root, "devices", devices);
        printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(root);
    } else {
        printf("clrun %s\n", clrun_version());
        unsigned platform = (unsigned)-1;
        for (size_t i = 0; i < count; i++) {
            if (list[i].platform_index != platform) {
                platform = list[i].platform_index;
                printf("platform %u: %s (%s)\n", platform, list[i].platform_name, list[i].platform_version);
            }
            print_device(&list[i], i == chosen);
        }
        if (selection == CLRUN_OK)
            printf("chosen: device %zu (%s)\n", chosen, list[chosen].name);
    }
    if (selection != CLRUN_OK)
        fprintf(stderr, "clrun info: %s\n", clrun_last_error(NULL));
    clrun_device_list_free(list);
    return selection == CLRUN_OK && settings_valid ? 0 : 1;
}
