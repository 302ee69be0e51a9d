/* clrun: the command-line tool. Dispatches to one function per subcommand. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clrun/clrun.h>

#include "cli.h"
#include "cmd_plan.h"
#include "pin_threads.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", clrun_cli_info, "list OpenCL platforms and devices, mark the one clrun would choose"},
    {"run", clrun_cli_run, "run a .graph file or an ONNX model: time, memory, output checksums"},
    {"smoke", clrun_cli_smoke, "run a kernel on the chosen device and check it against C"},
    {"grad", clrun_cli_grad, "write the gradient of a model's scalar loss as a .graph file"},
    {"train", clrun_cli_train, "train a model on .npy data: gradients, optimizer, state in place"},
    {"plan", clrun_cli_plan, "lay out a graph's or a CSV's buffers ahead of time (static planner)"},
    {"onnx-test", clrun_cli_onnx_test, "run ONNX backend test cases and compare with their outputs"},
    {"replay", clrun_cli_replay, "replay an allocation trace (CSV) through a strategy, no device needed"},
};

#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: clrun [--help] [--version] COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'clrun COMMAND --help' describes a command. The CLRUN_* environment variables\n"
                 "(see 'clrun info --env') choose the device, allocator and logging.\n");
}

int clrun_cli_usage_error(const char *command_name, const char *format, ...)
{
    va_list args;
    fprintf(stderr, "clrun %s: ", command_name);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, "\nTry 'clrun %s --help'.\n", command_name);
    return 2;
}

bool clrun_cli_parse_u64(const char *text, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE || *end)
        return false;
    *out = v;
    return true;
}

bool clrun_cli_parse_timeout(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || !(v > 0))
        return false;
    *out = v;
    return true;
}

static const clrun_option_info cli_options[] = {
    {.name = "CLRUN_MPI_TIMEOUT", .accepted = "SECONDS>0", .fallback = "60",
     .help = "the command line only: under mpirun, how long clrun train's gradient all-reduce may "
             "wait for the other ranks before the rank fails naming the step (--mpi-timeout "
             "overrides it)"},
    {.name = "CLRUN_PIN_THREADS", .accepted = "BOOL", .fallback = "1",
     .help = "the command line only: pin POCL's worker threads to CPUs, thread i to CPU i (sets "
             "POCL_AFFINITY=1 before OpenCL starts) where POCL_AFFINITY is unset and the process "
             "may run on every CPU of the machine; 0: leave them to the scheduler"},
};

size_t clrun_cli_option_count(void) { return sizeof cli_options / sizeof cli_options[0]; }

void clrun_cli_option_get(size_t i, clrun_option_info *out)
{
    *out = cli_options[i];
    out->value = getenv(out->name);
    if (strcmp(out->name, "CLRUN_PIN_THREADS") == 0) {
        bool pin;
        out->valid = out->value == NULL || clrun_cli_parse_pin(out->value, &pin);
        if (!out->valid)
            snprintf(out->problem, sizeof out->problem, "%s takes 1 or 0 (true, false, yes, no, on, off), not '%s'",
                     out->name, out->value);
        return;
    }
    double seconds;
    out->valid = out->value == NULL || clrun_cli_parse_timeout(out->value, &seconds);
    if (!out->valid)
        snprintf(out->problem, sizeof out->problem, "%s takes seconds > 0, not '%s'", out->name,
                 out->value);
}

int clrun_cli_parse_devices(const char *text, unsigned *devices, int max)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v > 65535 || n == max || *p == '-')
            return -1;
        devices[n++] = (unsigned)v;
        p = *end ? end + 1 : end;
        if (*end == ',' && *p == '\0')
            return -1;
    }
    return n;
}

int clrun_cli_input_exit(clrun_status status)
{
    switch (status) {
    case CLRUN_ERROR_PARSE:
    case CLRUN_ERROR_INVALID_GRAPH:
    case CLRUN_ERROR_UNKNOWN_KERNEL:
    case CLRUN_ERROR_INVALID_SIZE:
        return 2; /* the input is malformed */
    default:
        return 1; /* it could not be read: I/O, host memory, ... */
    }
}

int clrun_cli_data_exit(clrun_status status)
{
    return status == CLRUN_ERROR_IO || status == CLRUN_ERROR_OUT_OF_HOST_MEMORY ? 1 : 2;
}

int clrun_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    char problem[512];
    if (clrun_cli_pin_threads(problem, sizeof problem) != 0) { /* before any OpenCL call */
        fprintf(stderr, "clrun: %s\n", problem);
        return 2;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("clrun %s\n", clrun_version());
        return 0;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "clrun: %s '%s'\n\n", argv[1][0] == '-' ? "unknown option" : "unknown command", argv[1]);
    usage(stderr);
    return 2;
}
