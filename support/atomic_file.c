/* Temporary file + fsync + rename (atomic_file.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fsync, O_CLOEXEC */
#endif

#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return -1;
    int n = snprintf(err, errlen, "%s: ", path);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* callers print this as one log line; a path may contain anything */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return -1;
}

/* write() until all n bytes are out (it may write less, or be interrupted). */
static int write_full(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int rqs_write_atomic(const char *path, const rqs_span *parts, size_t n, char *err, size_t errlen)
{
    if (!path || !*path)
        return fail(err, errlen, path ? path : "<null>", "invalid argument (empty path)");
    size_t tn = strlen(path) + 32;
    char *tmp = malloc(tn);
    if (!tmp)
        return fail(err, errlen, path, "out of memory");
    snprintf(tmp, tn, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int saved = errno;
        fail(err, errlen, path, "cannot create temporary file '%s': %s%s", tmp, strerror(saved),
             saved == EEXIST ? " (concurrent save of the same path, or a stale temp file)" : "");
        free(tmp);
        return -1;
    }
    const char *what = NULL;
    errno = 0;
    for (size_t i = 0; i < n && !what; i++)
        if (parts[i].len && write_full(fd, parts[i].data, parts[i].len))
            what = "write";
    if (!what && fsync(fd) != 0) /* so a crash after the rename cannot expose an empty file */
        what = "fsync";
    int saved = errno;
    if (close(fd) != 0 && !what) {
        what = "close";
        saved = errno;
    }
    if (!what && rename(tmp, path) != 0) {
        what = "rename";
        saved = errno;
    }
    if (what) {
        unlink(tmp);
        fail(err, errlen, path, "%s failed: %s", what, saved ? strerror(saved) : "short write");
    }
    free(tmp);
    return what ? -1 : 0;
}
