/* Reading files that models and data name: regular files only, opened without blocking (a FIFO
 * or a device is refused, never waited on or read for ever), never read past the size they have;
 * and, for a file named inside a model (external data), no symbolic link followed below the
 * model's folder, so that what is read lies inside that folder. */
#ifndef CLRUN_LIB_CORE_FILE_H
#define CLRUN_LIB_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <clrun/status.h>

/* Opens path for reading (a symbolic link in it is followed: the caller named the file) when it
 * is a regular file; its size goes to *size. -1 on failure, with the status (CLRUN_ERROR_IO: it
 * cannot be opened; CLRUN_ERROR_UNSUPPORTED: not a regular file) and the reason in why, which
 * names the file. */
int clrun__file_open(const char *path, uint64_t *size, clrun_status *status, char *why, size_t whylen);

/* Opens location, a relative path inside the folder dir (NULL: the current folder), when it is a
 * regular file reached without following any symbolic link at or below dir (dir itself may be
 * one) and without ".." components. Failures as clrun__file_open's; a link, an absolute path,
 * ".." or a file that is not regular is CLRUN_ERROR_UNSUPPORTED. */
int clrun__file_open_inside(const char *dir, const char *location, uint64_t *size, clrun_status *status,
                            char *why, size_t whylen);

/* Reads exactly n bytes at offset into buf; false on an error or an early end. */
bool clrun__file_read_at(int fd, void *buf, uint64_t n, uint64_t offset);

/* The whole of the regular file path (clrun__file_open's rules) when it has at most max bytes:
 * malloc'ed (never NULL for an empty file), its size in *size. NULL on failure, with the status
 * (CLRUN_ERROR_INVALID_SIZE when it is larger than max, CLRUN_ERROR_OUT_OF_HOST_MEMORY) and the
 * reason in why. */
void *clrun__file_read(const char *path, uint64_t max, size_t *size, clrun_status *status, char *why,
                       size_t whylen);

/* clrun__file_read's file mapped read-only into memory instead of read into a copy (the page
 * cache's pages themselves: no copy, no fresh pages to fault in), falling back to a read copy
 * where it cannot be mapped; given back with clrun__file_unmap(data, size, *mapped). The file
 * must not be truncated while mapped. */
void *clrun__file_map(const char *path, uint64_t max, size_t *size, bool *mapped, clrun_status *status,
                      char *why, size_t whylen);
void clrun__file_unmap(void *data, size_t size, bool mapped);

#endif
