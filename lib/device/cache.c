/* Binary cache entries: a fixed header, the key text, then the binary.
 *   magic "CLRUNBC1" | u32 key length | u64 binary length | u64 XXH64 of the binary | key | binary
 * The key is stored whole, so a hash collision in the file name is caught on load. */
#include "device/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char magic[8] = {'C', 'L', 'R', 'U', 'N', 'B', 'C', '1'};
#define HEADER_SIZE (8 + 4 + 8 + 8)
/* Largest entry read: program binaries are a few MiB; anything larger is not an entry of ours,
 * and reading it would cost time and memory before the checksum refuses it. */
#define MAX_ENTRY ((uint64_t)256 << 20)

unsigned long long clrun__hash64(const void *data, size_t size)
{
    return (unsigned long long)XXH64(data, size, 0);
}

bool clrun__cache_dir(const char *configured, char *out, size_t size)
{
    int n;
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (configured && configured[0])
        n = snprintf(out, size, "%s", configured);
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, size, "%s/clrun", xdg);
    else if (home && home[0])
        n = snprintf(out, size, "%s/.cache/clrun", home);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

void clrun__cache_path(const char *dir, const char *name, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s/%s-%016llx.bin", dir, name, clrun__hash64(key, strlen(key)));
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Owned by this user and writable by nobody else: what another local user could not have
 * planted or changed. A program binary is native code on CPU drivers. */
static bool trusted_mode(const struct stat *st, char *why, size_t size, const char *path)
{
    if (st->st_uid != geteuid()) {
        snprintf(why, size, "'%s' is owned by uid %u, not by this user", path, (unsigned)st->st_uid);
        return false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, size, "'%s' is writable by its group or by others (mode %03o)", path,
                 (unsigned)(st->st_mode & 0777));
        return false;
    }
    return true;
}

clrun__cache_trust clrun__cache_check_dir(const char *dir, char *why, size_t size)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno == ENOENT ? CLRUN__CACHE_ABSENT : CLRUN__CACHE_UNTRUSTED;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, size, "'%s' is not a directory", dir);
        return CLRUN__CACHE_UNTRUSTED;
    }
    return trusted_mode(&st, why, size, dir) ? CLRUN__CACHE_TRUSTED : CLRUN__CACHE_UNTRUSTED;
}

/* The whole entry, or NULL with *state MISS (no file) or REFUSED (why says what it is). Never
 * follows a link, never blocks on a FIFO or device, reads only a regular file of this user's,
 * not writable by others, of a bounded size. */
static unsigned char *read_entry(const char *path, size_t *size, clrun__cache_result *state,
                                 char *why, size_t why_size)
{
    *state = CLRUN__CACHE_REFUSED;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            *state = CLRUN__CACHE_MISS;
        else
            snprintf(why, why_size, "cannot open '%s': %s", path,
                     errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return NULL;
    }
    struct stat st;
    unsigned char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        snprintf(why, why_size, "'%s' is not a regular file", path);
    else if (!trusted_mode(&st, why, why_size, path))
        ; /* why says whose it is */
    else if ((uint64_t)st.st_size > MAX_ENTRY)
        snprintf(why, why_size, "'%s' is %llu bytes, more than an entry can be", path,
                 (unsigned long long)st.st_size);
    else if ((data = malloc((size_t)st.st_size + 1)) == NULL)
        snprintf(why, why_size, "out of host memory reading '%s'", path);
    if (data) {
        size_t got = 0;
        ssize_t n = 1;
        while (got < (size_t)st.st_size && (n = read(fd, data + got, (size_t)st.st_size - got)) > 0)
            got += (size_t)n;
        *size = got;
        *state = CLRUN__CACHE_CORRUPT; /* read: the caller checks what it holds */
    }
    close(fd);
    return data;
}

clrun__cache_result clrun__cache_load(const char *path, const char *key, unsigned char **out,
                                      size_t *out_size, char *why, size_t why_size)
{
    size_t size = 0;
    clrun__cache_result state;
    why[0] = '\0';
    unsigned char *data = read_entry(path, &size, &state, why, why_size);
    if (data == NULL)
        return state;
    size_t key_len = strlen(key);
    clrun__cache_result result = CLRUN__CACHE_CORRUPT;
    if (size >= HEADER_SIZE && memcmp(data, magic, sizeof magic) == 0) {
        uint64_t stored_key_len = get_u32(data + 8);
        uint64_t binary_len = get_u64(data + 12);
        uint64_t checksum = get_u64(data + 20);
        const unsigned char *stored_key = data + HEADER_SIZE;
        if (stored_key_len == key_len && binary_len > 0 &&
            binary_len == size - HEADER_SIZE - key_len && /* exact: truncation or junk is damage */
            memcmp(stored_key, key, key_len) == 0 &&
            XXH64(stored_key + key_len, (size_t)binary_len, 0) == checksum) {
            memmove(data, stored_key + key_len, (size_t)binary_len);
            *out = data;
            *out_size = (size_t)binary_len;
            return CLRUN__CACHE_HIT;
        }
    }
    free(data);
    return result;
}

/* mkdir -p with mode 0700 for what it creates (the cache holds native code); true when the
 * directory exists afterwards. */
static bool make_directories(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return false;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return false;
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool clrun__cache_store(const char *dir, const char *path, const char *key,
                        const unsigned char *data, size_t size, char *why, size_t why_size)
{
    if (!make_directories(dir)) {
        snprintf(why, why_size, "cannot create cache directory '%s': %s", dir, strerror(errno));
        return false;
    }
    if (clrun__cache_check_dir(dir, why, why_size) != CLRUN__CACHE_TRUSTED)
        return false; /* made by someone else between the check and here */
    size_t key_len = strlen(key);
    unsigned char header[HEADER_SIZE];
    memcpy(header, magic, sizeof magic);
    put_u32(header + 8, (uint32_t)key_len);
    put_u64(header + 12, size);
    put_u64(header + 20, XXH64(data, size, 0));

    char temp[4200];
    snprintf(temp, sizeof temp, "%s.XXXXXX", path);
    int fd = mkstemp(temp);
    if (fd < 0) {
        snprintf(why, why_size, "cannot write in cache directory '%s': %s", dir, strerror(errno));
        return false;
    }
    FILE *f = fdopen(fd, "wb");
    bool ok = f != NULL && fwrite(header, 1, sizeof header, f) == sizeof header &&
              fwrite(key, 1, key_len, f) == key_len && fwrite(data, 1, size, f) == size;
    if (f ? fclose(f) != 0 : close(fd) != 0)
        ok = false;
    if (ok && rename(temp, path) != 0)
        ok = false;
    if (!ok) {
        snprintf(why, why_size, "cannot write cache entry '%s': %s", path, strerror(errno));
        unlink(temp);
    }
    return ok;
}
