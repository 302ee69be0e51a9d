/* The CLRUN_* environment variables: one table, one parser. A value that does not parse is an
 * error naming the variable and the values it accepts, never silently replaced by the default. */
#include "core/options.h"

#include <clrun/options.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>

typedef enum option_kind {
    KIND_TEXT,     /* any text up to the field's size */
    KIND_BOOL,     /* a boolean */
    KIND_SIZE,     /* bytes with K/M/G/T suffix */
    KIND_FRACTION, /* a number in (0, 1] */
    KIND_LOG,      /* a log level name */
    KIND_ALLOC,    /* an allocator strategy name (or "naive"/"planned", executor modes) */
    KIND_DEBUG,    /* "guard" or "none" */
    KIND_QUEUE,    /* "in-order" or "out-of-order" */
    KIND_CACHE,    /* "auto" or a boolean */
    KIND_RATE,     /* a finite number >= 0 */
    KIND_RATE_AUTO, /* a finite number >= 0, or "auto" (-1) */
} option_kind;

typedef struct option_row {
    clrun__option_doc doc;
    option_kind kind;
    size_t offset; /* of the field in clrun__options */
    size_t size;   /* of the field, for text */
} option_row;

#define FIELD(f) offsetof(clrun__options, f), sizeof(((clrun__options *)0)->f)

/* Not const: the allocator row's accepted names and default come from the strategy registry,
 * filled in once (fill_registry_names) before any reader sees the table. */
static option_row option_table[] = {
    {{"CLRUN_PLATFORM", "INDEX|NAME", "", "platform: index or case-insensitive name substring"},
     KIND_TEXT, FIELD(platform)},
    {{"CLRUN_DEVICE", "INDEX|NAME", "", "device: index or case-insensitive name substring; default: first GPU, else first device"},
     KIND_TEXT, FIELD(device)},
    {{"CLRUN_LOG", "none|error|warn|info|debug", "none", "messages written to stderr (or to the application's handler)"},
     KIND_LOG, FIELD(log_level)},
    {{"CLRUN_CACHE", "auto|BOOL", "auto", "on-disk cache of compiled kernel binaries; auto: other drivers write at the first build; on POCL, whose own cache serves later processes, a process loads the binaries there are and writes none unless CLRUN_CACHE_BUDGET allows (see there); 1: write at the first build, on POCL each kernel launched in a program cut out of its file (one slow process, after which every process loads binaries)"},
     KIND_CACHE, FIELD(cache)},
    {{"CLRUN_CACHE_DIR", "PATH", "", "cache directory; default $XDG_CACHE_HOME/clrun, else ~/.cache/clrun"},
     KIND_TEXT, FIELD(cache_dir)},
    {{"CLRUN_CACHE_BUDGET", "SECONDS>=0", "0", "on POCL with CLRUN_CACHE=auto: the wall time a process that finds another's marker may spend building the kernels it launches in programs cut out of their files and writing their binaries; past it, it builds whole files and writes nothing more (0: never writes; each binary costs a compile of its own, 0.4-2.8 s)"},
     KIND_RATE, FIELD(cache_budget)},
    {{"CLRUN_ALLOCATOR", NULL /* the registry's names */, NULL /* the registry's default */,
      "pool strategy (naive and planned are executor modes)"},
     KIND_ALLOC, FIELD(allocator)},
    {{"CLRUN_PREALLOCATE", "BOOL", "0", "reserve CLRUN_MEM_FRACTION of device memory when the pool starts"},
     KIND_BOOL, FIELD(preallocate)},
    {{"CLRUN_MEM_FRACTION", "0<F<=1", "0.9", "fraction of global memory the pool may reserve (and preallocates)"},
     KIND_FRACTION, FIELD(mem_fraction)},
    {{"CLRUN_POOL_LIMIT", "SIZE", "0", "hard limit on bytes reserved, K/M/G/T suffixes; 0 = no limit beyond the fraction"},
     KIND_SIZE, FIELD(pool_limit)},
    {{"CLRUN_DEBUG", "none|guard", "none", "guard: red zones around every block, poison on free"},
     KIND_DEBUG, FIELD(guard)},
    {{"CLRUN_QUEUE", "in-order|out-of-order", "in-order", "command queue kind (out-of-order only where the device has it)"},
     KIND_QUEUE, FIELD(out_of_order)},
    {{"CLRUN_TUNE", "BOOL", "0", "time matmul/conv2d kernel variants once per (device, shape), remembered in the cache directory (a remembered choice is used either way)"},
     KIND_BOOL, FIELD(tune)},
    {{"CLRUN_FUSION", "BOOL", "1", "executors fuse groups of elementwise nodes into one generated kernel each"},
     KIND_BOOL, FIELD(fusion)},
    {{"CLRUN_FOLD", "BOOL", "1", "executors fold constant nodes and batch norms after convolutions at load (batch norm folding: within 1e-5, not bit-exact)"},
     KIND_BOOL, FIELD(fold)},
    {{"CLRUN_OFFLOAD_RATE", "auto|NUMBER>=0", "auto", "FLOPs the device computes in the time it moves one byte to host memory and back: under a memory budget, a dropped tensor is offloaded where moving its bytes twice costs less than recomputing it (0: offload wherever recomputing is not free; auto: measured on the device once per process, remembered in the cache directory)"},
     KIND_RATE_AUTO, FIELD(offload_rate)},
    {{"CLRUN_OFFLOAD_OVERLAP", "BOOL", "1", "under a memory budget, the copies of offloaded tensors to host memory and back run on a second queue, overlapped with the kernels (on an in-order queue); 0: on the kernels' queue, in order"},
     KIND_BOOL, FIELD(offload_overlap)},
    {{"CLRUN_SCAN_UNROLL", "NUMBER>=0", "256", "an ONNX Scan is unrolled at load while its steps times its body's nodes are at most this, else its body runs once per iteration; 0: every Scan of opset 9 on runs per iteration"},
     KIND_RATE, FIELD(scan_unroll)},
};

#define OPTION_COUNT (sizeof option_table / sizeof option_table[0])

/* ---- the allocator choice ---------------------------------------------------------------- */

static const char *const mode_names[] = {[CLRUN__EXEC_NAIVE] = "naive",
                                         [CLRUN__EXEC_PLANNED] = "planned"};

bool clrun__allocator_choice_parse(const char *text, clrun__allocator_choice *out)
{
    const clrun_strategy_ops *strategy = clrun_strategy_find(text);
    if (strategy) {
        *out = (clrun__allocator_choice){strategy, CLRUN__EXEC_POOLED};
        return true;
    }
    for (int mode = CLRUN__EXEC_NAIVE; mode <= CLRUN__EXEC_PLANNED; mode++)
        if (text && strcasecmp(text, mode_names[mode]) == 0) {
            *out = (clrun__allocator_choice){clrun_strategy_default(), (clrun__exec_choice)mode};
            return true;
        }
    return false;
}

const char *clrun__allocator_choice_name(const clrun__allocator_choice *choice)
{
    return choice->mode == CLRUN__EXEC_POOLED ? choice->strategy->name : mode_names[choice->mode];
}

static char choice_names[320];
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;

static void fill_registry_names(void)
{
    snprintf(choice_names, sizeof choice_names, "%s|%s|%s", clrun_strategy_names(),
             mode_names[CLRUN__EXEC_NAIVE], mode_names[CLRUN__EXEC_PLANNED]);
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (option_table[i].kind == KIND_ALLOC) {
            option_table[i].doc.accepted = choice_names;
            option_table[i].doc.fallback = clrun_strategy_default()->name;
        }
}

const char *clrun__allocator_choice_names(void)
{
    pthread_once(&registry_once, fill_registry_names);
    return choice_names;
}

bool clrun_allocator_valid(const char *name)
{
    clrun__allocator_choice choice;
    return clrun__allocator_choice_parse(name, &choice);
}

const char *clrun_allocator_names(void) { return clrun__allocator_choice_names(); }

/* ---- the table --------------------------------------------------------------------------- */

size_t clrun__options_count(void) { return OPTION_COUNT; }

const clrun__option_doc *clrun__options_doc(size_t i)
{
    pthread_once(&registry_once, fill_registry_names);
    return i < OPTION_COUNT ? &option_table[i].doc : NULL;
}

bool clrun__parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

bool clrun__parse_size(const char *text, uint64_t *out)
{
    if (!isdigit((unsigned char)text[0]))
        return false; /* strtoull would accept "-1" and " 1" */
    errno = 0;
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return false;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return false;
    if (shift && value > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)value << shift;
    return true;
}

static bool parse_fraction(const char *text, double *out)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value) || value <= 0.0 || value > 1.0)
        return false;
    *out = value;
    return true;
}

static bool parse_rate(const char *text, double *out)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value) || !(value >= 0.0))
        return false;
    *out = value;
    return true;
}

static bool parse_log(const char *text, clrun_log_level *out)
{
    static const clrun_log_level levels[] = {CLRUN_LOG_NONE, CLRUN_LOG_ERROR, CLRUN_LOG_WARN,
                                             CLRUN_LOG_INFO, CLRUN_LOG_DEBUG};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (strcasecmp(text, clrun_log_level_name(levels[i])) == 0) {
            *out = levels[i];
            return true;
        }
    }
    if (strcasecmp(text, "warning") == 0) {
        *out = CLRUN_LOG_WARN;
        return true;
    }
    return false;
}

static bool parse_text(const char *text, char *out, size_t size)
{
    if (strlen(text) >= size)
        return false;
    memcpy(out, text, strlen(text) + 1);
    return true;
}

static bool parse_value(const option_row *row, const char *text, clrun__options *options)
{
    void *field = (char *)options + row->offset;
    switch (row->kind) {
    case KIND_TEXT: return parse_text(text, field, row->size);
    case KIND_BOOL: return clrun__parse_bool(text, field);
    case KIND_SIZE: return clrun__parse_size(text, field);
    case KIND_FRACTION: return parse_fraction(text, field);
    case KIND_RATE: return parse_rate(text, field);
    case KIND_RATE_AUTO:
        if (strcasecmp(text, "auto") == 0) {
            *(double *)field = -1.0;
            return true;
        }
        return parse_rate(text, field);
    case KIND_LOG: return parse_log(text, field);
    case KIND_ALLOC: return clrun__allocator_choice_parse(text, field);
    case KIND_DEBUG:
        if (strcasecmp(text, "guard") == 0 || strcasecmp(text, "none") == 0 || text[0] == '\0') {
            *(bool *)field = strcasecmp(text, "guard") == 0;
            return true;
        }
        return false;
    case KIND_CACHE: {
        clrun__cache_mode *mode = field;
        bool on;
        if (strcasecmp(text, "auto") == 0) {
            *mode = (clrun__cache_mode){true, false};
            return true;
        }
        if (!clrun__parse_bool(text, &on))
            return false;
        *mode = (clrun__cache_mode){on, on};
        return true;
    }
    case KIND_QUEUE:
        if (strcasecmp(text, "in-order") == 0 || strcasecmp(text, "out-of-order") == 0) {
            *(bool *)field = strcasecmp(text, "out-of-order") == 0;
            return true;
        }
        return false;
    }
    return false;
}

/* Why `text` is not a valid value of row, naming the variable and what it accepts. */
static void describe_invalid(const option_row *row, const char *text, char *err, size_t errlen)
{
    if (row->kind == KIND_BOOL || row->kind == KIND_CACHE)
        snprintf(err, errlen, "%s='%s' is not valid: accepted values are %s1|0|true|false|yes|no|on|off",
                 row->doc.name, text, row->kind == KIND_CACHE ? "auto|" : "");
    else if (row->kind == KIND_SIZE)
        snprintf(err, errlen, "%s='%s' is not valid: accepted values are a byte count with an "
                 "optional K, M, G or T suffix (e.g. 512M)", row->doc.name, text);
    else if (row->kind == KIND_TEXT)
        snprintf(err, errlen, "%s is too long (at most %zu characters)", row->doc.name,
                 row->size - 1);
    else
        snprintf(err, errlen, "%s='%s' is not valid: accepted values are %s", row->doc.name, text,
                 row->doc.accepted);
}

/* Parses row's variable from the environment into options (the default when unset or set
 * empty); false with the reason in err when its value is not valid. */
static bool load_row(const option_row *row, clrun__options *options, char *err, size_t errlen)
{
    const char *text = getenv(row->doc.name);
    if (text == NULL || (text[0] == '\0' && row->kind != KIND_TEXT))
        return true;
    if (parse_value(row, text, options))
        return true;
    describe_invalid(row, text, err, errlen);
    return false;
}

clrun_status clrun__options_load(clrun__options *out, char *err, size_t errlen)
{
    pthread_once(&registry_once, fill_registry_names);
    clrun__options options;
    memset(&options, 0, sizeof options);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_row *row = &option_table[i];
        if (!parse_value(row, row->doc.fallback, &options)) {
            snprintf(err, errlen, "internal: default of %s does not parse", row->doc.name);
            return CLRUN_ERROR_INVALID_OPTION;
        }
        if (!load_row(row, &options, err, errlen))
            return CLRUN_ERROR_INVALID_OPTION;
    }
    *out = options;
    return CLRUN_OK;
}

/* ---- the public listing ------------------------------------------------------------------- */

size_t clrun_option_count(void) { return OPTION_COUNT; }

clrun_status clrun_option_get(size_t i, clrun_option_info *out)
{
    if (out == NULL || i >= OPTION_COUNT)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    pthread_once(&registry_once, fill_registry_names);
    const option_row *row = &option_table[i];
    clrun__options scratch;
    memset(&scratch, 0, sizeof scratch);
    *out = (clrun_option_info){row->doc.name, row->doc.accepted, row->doc.fallback,
                               row->doc.help, getenv(row->doc.name), true, ""};
    out->valid = load_row(row, &scratch, out->problem, sizeof out->problem);
    return CLRUN_OK;
}

bool clrun_parse_bool(const char *text, bool *out) { return text && out && clrun__parse_bool(text, out); }

bool clrun_parse_size(const char *text, uint64_t *out)
{
    return text && out && clrun__parse_size(text, out);
}

clrun_log_level clrun__options_env_log_level(void)
{
    clrun__options options;
    memset(&options, 0, sizeof options);
    const char *text = getenv("CLRUN_LOG");
    if (text == NULL || !parse_log(text, &options.log_level))
        return CLRUN_LOG_NONE;
    return options.log_level;
}
