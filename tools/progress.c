/* Progress on a terminal: see progress.h. */
#include "progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Shown once the work is older than this; redrawn this often. */
#define SHOW_AFTER_S 1.0
#define REDRAW_NS 200000000L

struct clrun_progress {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    bool shown;
    char what[256];
    char phase[128];
    struct timespec start;
};

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) * 1e-9;
}

static void *redraw(void *arg)
{
    clrun_progress *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        double elapsed = seconds_since(&p->start);
        if (elapsed >= SHOW_AFTER_S) {
            fprintf(stderr, "\r\033[K%s: %s, %.1f s", p->what, p->phase, elapsed);
            fflush(stderr);
            p->shown = true;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += REDRAW_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->wake, &p->lock, &until);
    }
    if (p->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

clrun_progress *clrun_progress_start(const char *what, bool enabled)
{
    if (!enabled || !isatty(STDERR_FILENO))
        return NULL;
    clrun_progress *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    snprintf(p->what, sizeof p->what, "%s", what);
    snprintf(p->phase, sizeof p->phase, "starting");
    clock_gettime(CLOCK_MONOTONIC, &p->start);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, redraw, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->wake);
        free(p);
        return NULL;
    }
    return p;
}

void clrun_progress_phase(clrun_progress *p, const char *phase)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->phase, sizeof p->phase, "%s", phase);
    pthread_mutex_unlock(&p->lock);
}

void clrun_progress_stop(clrun_progress *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}
