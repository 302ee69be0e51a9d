/* clrun: logging. The library prints nothing unless CLRUN_LOG asks for it or the application
 * installs a handler; it never aborts. */
#ifndef CLRUN_LOG_H
#define CLRUN_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clrun_log_level {
    CLRUN_LOG_NONE = 0,  /* nothing (the default) */
    CLRUN_LOG_ERROR = 1, /* a call failed */
    CLRUN_LOG_WARN = 2,  /* something degraded but went on (cache not writable, donation unused) */
    CLRUN_LOG_INFO = 3,  /* device chosen, programs built, pool growth */
    CLRUN_LOG_DEBUG = 4, /* every allocation, free, executor step and kernel launch */
} clrun_log_level;

/* Receives each message at or below the current level; `message` has no trailing newline. */
typedef void (*clrun_log_handler)(clrun_log_level level, const char *message, void *user);

/* Replaces the handler (NULL restores the default, which writes "clrun: level: message" to
 * stderr). Process-wide; call it before using clrun from other threads: a handler may still be
 * running in another thread just after it was replaced, so its `user` must outlive that. */
void clrun_log_set_handler(clrun_log_handler handler, void *user);

/* Sets the level; by default it comes from CLRUN_LOG (error|warn|info|debug|none). */
void clrun_log_set_level(clrun_log_level level);

/* The current level. */
clrun_log_level clrun_log_get_level(void);

/* "error", "warn", "info", "debug" or "none". */
const char *clrun_log_level_name(clrun_log_level level);

#ifdef __cplusplus
}
#endif
#endif
