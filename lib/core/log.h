/* Internal logging entry point: formats and hands the message to the installed handler. */
#ifndef CLRUN_LIB_LOG_H
#define CLRUN_LIB_LOG_H

#include <stdbool.h>

#include <clrun/log.h>

#if defined(__GNUC__) || defined(__clang__)
#define CLRUN__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLRUN__PRINTF(f, a)
#endif

/* True when messages at `level` are written: guard work done only to log (one atomic load). */
bool clrun__log_enabled(clrun_log_level level);

/* Logs when `level` is at or below the current level; cheap when it is not. */
void clrun__log(clrun_log_level level, const char *format, ...) CLRUN__PRINTF(2, 3);

#endif
