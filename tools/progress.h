/* Progress of long commands on a terminal: one status line on stderr, shown only when stderr is
 * a terminal and the work has taken more than a second, erased when it ends. A background
 * thread redraws it, so a single long call (building an executor) shows its time too. */
#ifndef CLRUN_TOOLS_PROGRESS_H
#define CLRUN_TOOLS_PROGRESS_H

#include <stdbool.h>

typedef struct clrun_progress clrun_progress;

/* Starts showing `what` ("clrun run: gpt2"); NULL (and nothing shown) when stderr is not a
 * terminal, when `enabled` is false, or when the thread cannot start. */
clrun_progress *clrun_progress_start(const char *what, bool enabled);

/* The current phase ("compiling and uploading", "run 3 of 5"); copied. NULL is accepted. */
void clrun_progress_phase(clrun_progress *progress, const char *phase);

/* Erases the line and stops. NULL is accepted. */
void clrun_progress_stop(clrun_progress *progress);

#endif
