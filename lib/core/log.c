/* Logging: a replaceable handler and a level from CLRUN_LOG, read once. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core/options.h"

static void default_handler(clrun_log_level level, const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "clrun: %s: %s\n", clrun_log_level_name(level), message);
}

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static _Atomic int current_level = CLRUN_LOG_NONE;
static _Atomic int level_set_by_api = 0;
static clrun_log_handler current_handler = default_handler;
static void *current_user = NULL;
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;

static void read_level_from_env(void)
{
    if (!atomic_load(&level_set_by_api))
        atomic_store(&current_level, (int)clrun__options_env_log_level());
}

void clrun_log_set_handler(clrun_log_handler handler, void *user)
{
    pthread_mutex_lock(&handler_lock);
    current_handler = handler ? handler : default_handler;
    current_user = handler ? user : NULL;
    pthread_mutex_unlock(&handler_lock);
}

void clrun_log_set_level(clrun_log_level level)
{
    pthread_once(&level_once, read_level_from_env);
    atomic_store(&level_set_by_api, 1);
    atomic_store(&current_level, (int)level);
}

clrun_log_level clrun_log_get_level(void)
{
    pthread_once(&level_once, read_level_from_env);
    return (clrun_log_level)atomic_load(&current_level);
}

const char *clrun_log_level_name(clrun_log_level level)
{
    switch (level) {
    case CLRUN_LOG_NONE: return "none";
    case CLRUN_LOG_ERROR: return "error";
    case CLRUN_LOG_WARN: return "warn";
    case CLRUN_LOG_INFO: return "info";
    case CLRUN_LOG_DEBUG: return "debug";
    }
    return "unknown";
}

bool clrun__log_enabled(clrun_log_level level)
{
    return level != CLRUN_LOG_NONE && (int)level <= (int)clrun_log_get_level();
}

void clrun__log(clrun_log_level level, const char *format, ...)
{
    if (!clrun__log_enabled(level))
        return;
    char message[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    pthread_mutex_lock(&handler_lock);
    clrun_log_handler handler = current_handler;
    void *user = current_user;
    pthread_mutex_unlock(&handler_lock);
    handler(level, message, user);
}
