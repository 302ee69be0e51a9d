/* Failure messages: one record per owner, and one per thread for calls without an owner. */
#include "core/error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char thread_error[CLRUN__ERROR_MAX];
static _Thread_local char thread_copy[CLRUN__ERROR_MAX];

int clrun__error_record_init(clrun__error_record *record)
{
    record->message[0] = '\0';
    return pthread_mutex_init(&record->lock, NULL);
}

void clrun__error_record_destroy(clrun__error_record *record)
{
    pthread_mutex_destroy(&record->lock);
}

clrun_status clrun__error_vset(clrun__error_record *record, clrun_status status,
                               const char *format, va_list args)
{
    char message[CLRUN__ERROR_MAX];
    vsnprintf(message, sizeof message, format, args);
    if (record == NULL) {
        memcpy(thread_error, message, sizeof thread_error);
    } else {
        pthread_mutex_lock(&record->lock);
        memcpy(record->message, message, sizeof record->message);
        pthread_mutex_unlock(&record->lock);
    }
    clrun__log(CLRUN_LOG_ERROR, "%s", message);
    return status;
}

clrun_status clrun__error_set(clrun__error_record *record, clrun_status status, const char *format,
                              ...)
{
    va_list args;
    va_start(args, format);
    clrun__error_vset(record, status, format, args);
    va_end(args);
    return status;
}

clrun_status clrun__error_report(char *err, size_t errlen, clrun_status status, const char *format,
                                 ...)
{
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    if (err && errlen)
        snprintf(err, errlen, "%s", message);
    return clrun__error_set(NULL, status, "%s", message);
}

const char *clrun__error_get(clrun__error_record *record)
{
    if (record == NULL) {
        memcpy(thread_copy, thread_error, sizeof thread_copy);
    } else {
        pthread_mutex_lock(&record->lock);
        memcpy(thread_copy, record->message, sizeof thread_copy);
        pthread_mutex_unlock(&record->lock);
    }
    return thread_copy;
}
