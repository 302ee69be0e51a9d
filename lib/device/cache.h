/* The on-disk cache of compiled program binaries, keyed like JAX's compilation cache: device,
 * driver version, build options and a hash of the source. An entry that is corrupt, truncated or
 * written for another key is treated as absent; a directory that cannot be written is a warning. */
#ifndef CLRUN_LIB_CACHE_H
#define CLRUN_LIB_CACHE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum clrun__cache_result {
    CLRUN__CACHE_MISS,    /* no entry */
    CLRUN__CACHE_HIT,     /* *data holds the binary (free() it) */
    CLRUN__CACHE_CORRUPT, /* an entry exists but is damaged or for another key: rebuilt */
    CLRUN__CACHE_REFUSED, /* an entry another user could have written, a link or not a regular
                             file: never read, never replaced (why says which) */
} clrun__cache_result;

/* Whether a cache directory may be used, as ccache and Mesa's shader cache decide: it must be
 * a directory owned by this user and writable by nobody else (why says otherwise). */
typedef enum clrun__cache_trust {
    CLRUN__CACHE_TRUSTED,
    CLRUN__CACHE_ABSENT,    /* not there yet: created 0700 on the first write */
    CLRUN__CACHE_UNTRUSTED,
} clrun__cache_trust;
clrun__cache_trust clrun__cache_check_dir(const char *dir, char *why, size_t size);

/* Where the cache lives: `configured` if not empty, else $XDG_CACHE_HOME/clrun, else
 * $HOME/.cache/clrun. False when none can be determined. */
bool clrun__cache_dir(const char *configured, char *out, size_t size);

/* The entry's file name for a program name and full key text. */
void clrun__cache_path(const char *dir, const char *name, const char *key, char *out, size_t size);

/* Reads the entry at path if it is a regular file of this user's, not writable by others, at
 * most 256 MiB, its stored key equals `key` and its checksum holds; opened without following
 * links or blocking. why gets the reason of a refusal. */
clrun__cache_result clrun__cache_load(const char *path, const char *key, unsigned char **data,
                                      size_t *size, char *why, size_t why_size);

/* Writes an entry atomically (a 0600 temporary file, then rename), creating the directory
 * 0700. False, with a reason in why, when it cannot be written or the directory is not
 * trusted. */
bool clrun__cache_store(const char *dir, const char *path, const char *key,
                        const unsigned char *data, size_t size, char *why, size_t why_size);

/* 64-bit hash of bytes (xxHash), used for source hashes, keys and checksums. */
unsigned long long clrun__hash64(const void *data, size_t size);

#endif
