/* One kernel's program cut out of a file of kernels: the other kernels' definitions blanked, so
 * that a driver asked for the program's binary compiles only the kernel that is launched. Pure C. */
#ifndef CLRUN_LIB_SUBSET_H
#define CLRUN_LIB_SUBSET_H

#include <stdbool.h>
#include <stddef.h>

/* Copies text[0, length) to out (length + 1 bytes, NUL-terminated) with every kernel definition
 * other than those named `keep` replaced by blanks, newlines kept (build logs keep their line
 * numbers). A kernel definition is, as kernels/embed.sh finds kernels, a line that starts with
 * `__kernel void NAME(` (or `kernel void NAME(`; `__kernel` may end its line), up to the brace
 * that closes its body; braces in comments are not counted. Everything else (helpers, macros, conditionals) is kept. False, out
 * unspecified, when no kernel named `keep` is there or a body does not close: the caller builds
 * the whole file instead. */
bool clrun__kernel_subset(const char *text, size_t length, const char *keep, char *out);

#endif
