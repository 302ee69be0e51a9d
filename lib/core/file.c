/* Reading files that models and data name: see file.h. Every open is O_NONBLOCK (a FIFO without
 * a writer opens at once instead of waiting, and is then refused by fstat), O_CLOEXEC, and, inside
 * a model's folder, O_NOFOLLOW one component at a time with openat, as the kernel cache reader
 * (lib/device/cache.c) opens its entries. */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a regular file";
}

static int refuse(int fd, clrun_status *status, clrun_status s, char *why, size_t whylen, const char *text)
{
    if (fd >= 0)
        close(fd);
    *status = s;
    snprintf(why, whylen, "%s", text);
    return -1;
}

/* fd when it is a regular file (its size into *size), else -1 (closed) with the reason. */
static int regular(int fd, uint64_t *size, clrun_status *status, char *why, size_t whylen)
{
    struct stat st;
    char text[96];
    if (fstat(fd, &st) != 0)
        return refuse(fd, status, CLRUN_ERROR_IO, why, whylen, "cannot be examined");
    if (!S_ISREG(st.st_mode)) {
        snprintf(text, sizeof text, "is %s, not a regular file", kind_of(st.st_mode));
        return refuse(fd, status, CLRUN_ERROR_UNSUPPORTED, why, whylen, text);
    }
    if (st.st_size < 0)
        return refuse(fd, status, CLRUN_ERROR_IO, why, whylen, "has a negative size");
    /* Back to blocking reads: a regular file never waits, and some systems give EAGAIN otherwise. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *size = (uint64_t)st.st_size;
    return fd;
}

int clrun__file_open(const char *path, uint64_t *size, clrun_status *status, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        char text[160];
        snprintf(text, sizeof text, "cannot read: %s", strerror(errno));
        return refuse(-1, status, CLRUN_ERROR_IO, why, whylen, text);
    }
    return regular(fd, size, status, why, whylen);
}

int clrun__file_open_inside(const char *dir, const char *location, uint64_t *size, clrun_status *status,
                            char *why, size_t whylen)
{
    if (location[0] == '\0' || location[0] == '/')
        return refuse(-1, status, CLRUN_ERROR_UNSUPPORTED, why, whylen,
                      "is not a relative path inside the model's folder");
    int fd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        char text[160];
        snprintf(text, sizeof text, "cannot be opened: folder '%s': %s", dir ? dir : ".", strerror(errno));
        return refuse(-1, status, CLRUN_ERROR_IO, why, whylen, text);
    }
    const char *p = location;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        bool last = slash == NULL || slash[strspn(slash, "/")] == '\0';
        char part[256];
        if (len >= sizeof part)
            return refuse(fd, status, CLRUN_ERROR_UNSUPPORTED, why, whylen, "has a component too long");
        memcpy(part, p, len);
        part[len] = '\0';
        p += len;
        p += strspn(p, "/");
        if (len == 0 || strcmp(part, ".") == 0) {
            if (last)
                return refuse(fd, status, CLRUN_ERROR_UNSUPPORTED, why, whylen, "names no file");
            continue;
        }
        if (strcmp(part, "..") == 0)
            return refuse(fd, status, CLRUN_ERROR_UNSUPPORTED, why, whylen,
                          "is not a relative path inside the model's folder");
        int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (last ? 0 : O_DIRECTORY);
        int next = openat(fd, part, flags);
        int error = errno;
        if (next < 0) {
            struct stat st;
            char text[400];
            clrun_status s = CLRUN_ERROR_UNSUPPORTED;
            if (fstatat(fd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                snprintf(text, sizeof text, "'%s' is a symbolic link, which is not followed (the file must lie "
                         "inside the folder)", part);
            else if (error == ENOTDIR)
                snprintf(text, sizeof text, "'%s' is not a directory", part);
            else {
                snprintf(text, sizeof text, "cannot be opened: %s", strerror(error));
                s = CLRUN_ERROR_IO;
            }
            return refuse(fd, status, s, why, whylen, text);
        }
        close(fd);
        fd = next;
        if (last)
            return regular(fd, size, status, why, whylen);
    }
    return refuse(fd, status, CLRUN_ERROR_UNSUPPORTED, why, whylen, "names no file");
}

bool clrun__file_read_at(int fd, void *buf, uint64_t n, uint64_t offset)
{
    unsigned char *p = buf;
    while (n) {
        size_t want = n > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)n;
        if (offset > (uint64_t)INT64_MAX)
            return false;
        ssize_t got = pread(fd, p, want, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return false;
        p += got;
        n -= (uint64_t)got;
        offset += (uint64_t)got;
    }
    return true;
}

void *clrun__file_read(const char *path, uint64_t max, size_t *size, clrun_status *status, char *why,
                       size_t whylen)
{
    uint64_t bytes = 0;
    int fd = clrun__file_open(path, &bytes, status, why, whylen);
    if (fd < 0)
        return NULL;
    unsigned char *data = NULL;
    if (bytes > max || bytes >= SIZE_MAX) {
        *status = CLRUN_ERROR_INVALID_SIZE;
        snprintf(why, whylen, "is %llu bytes, more than the %llu it may be",
                 (unsigned long long)bytes, (unsigned long long)max);
    } else if ((data = malloc((size_t)bytes + 1)) == NULL) {
        *status = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(why, whylen, "out of host memory");
    } else if ((errno = 0, !clrun__file_read_at(fd, data, bytes, 0))) {
        *status = CLRUN_ERROR_IO;
        snprintf(why, whylen, "cannot be read: %s", errno ? strerror(errno) : "it ended early");
        free(data);
        data = NULL;
    } else {
        *size = (size_t)bytes;
    }
    close(fd);
    return data;
}

void *clrun__file_map(const char *path, uint64_t max, size_t *size, bool *mapped, clrun_status *status,
                      char *why, size_t whylen)
{
    *mapped = false;
    uint64_t bytes = 0;
    int fd = clrun__file_open(path, &bytes, status, why, whylen);
    if (fd < 0)
        return NULL;
    void *data = MAP_FAILED;
    if (bytes > 0 && bytes <= max && bytes < SIZE_MAX)
        data = mmap(NULL, (size_t)bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data != MAP_FAILED) {
        *mapped = true;
        *size = (size_t)bytes;
        return data;
    }
    return clrun__file_read(path, max, size, status, why, whylen);
}

void clrun__file_unmap(void *data, size_t size, bool mapped)
{
    if (mapped)
        munmap(data, size);
    else
        free(data);
}
