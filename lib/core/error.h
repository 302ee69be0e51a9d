/* Failure messages. Every failing call leaves a message saying what failed: in an error record
 * (a context owns one, see device/context.h's clrun__fail) or, for calls without one, in this
 * thread's record. Recording also logs the message at error level. */
#ifndef CLRUN_LIB_CORE_ERROR_H
#define CLRUN_LIB_CORE_ERROR_H

#include <pthread.h>
#include <stdarg.h>

#include <clrun/status.h>

#include "core/log.h"

#define CLRUN__ERROR_MAX 4096

/* The last failure message of one owner, safe to set and read from several threads. */
typedef struct clrun__error_record {
    pthread_mutex_t lock;
    char message[CLRUN__ERROR_MAX];
} clrun__error_record;

/* An empty record; 0 or the pthread error. destroy accepts an initialised record only. */
int clrun__error_record_init(clrun__error_record *record);
void clrun__error_record_destroy(clrun__error_record *record);

/* Formats the message into `record` (NULL: this thread's), logs it and returns status, so that
 * callers can `return clrun__error_set(...)`. */
clrun_status clrun__error_set(clrun__error_record *record, clrun_status status, const char *format,
                              ...) CLRUN__PRINTF(3, 4);
clrun_status clrun__error_vset(clrun__error_record *record, clrun_status status,
                               const char *format, va_list args) CLRUN__PRINTF(3, 0);

/* Formats the message once into err (errlen bytes, when err is not NULL) and into this
 * thread's record, for the calls that hand back a message in a buffer of the caller's (graph
 * parsing, splitting, saving) and set the last error too; returns status. */
clrun_status clrun__error_report(char *err, size_t errlen, clrun_status status, const char *format,
                                 ...) CLRUN__PRINTF(4, 5);

/* A copy of the record's message (NULL: this thread's) in a thread-local buffer that stays valid
 * until this thread's next call. */
const char *clrun__error_get(clrun__error_record *record);

#endif
