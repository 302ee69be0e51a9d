/* LD_PRELOAD library for tests/cli_oom.sh: makes the Nth call of malloc, calloc or realloc in
 * the process fail (CLRUN_TEST_MALLOC_FAIL=N), once, and says so on stderr, so that a test can
 * check what a program does with every failure point in turn. glibc's own entry points do the
 * real work (dlsym would allocate). Not for sanitizer builds, whose runtimes interpose malloc. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t size);

static unsigned long calls, fail_at;
static int armed = -1;

/* True when this call is the one to fail. */
static int fails(void)
{
    if (armed < 0) {
        const char *text = getenv("CLRUN_TEST_MALLOC_FAIL");
        fail_at = text ? strtoul(text, NULL, 10) : 0;
        armed = fail_at > 0;
    }
    if (!armed || ++calls != fail_at)
        return 0;
    static const char note[] = "malloc_fail: failing this allocation\n";
    if (write(STDERR_FILENO, note, sizeof note - 1) < 0)
        return 1;
    errno = ENOMEM; /* as the real allocator does */
    return 1;
}

void *malloc(size_t size) { return fails() ? NULL : __libc_malloc(size); }
void *calloc(size_t count, size_t size) { return fails() ? NULL : __libc_calloc(count, size); }
void *realloc(void *p, size_t size) { return fails() ? NULL : __libc_realloc(p, size); }
