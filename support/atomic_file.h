/* Writing a file whole or not at all: the one copy of "temporary file + rename" behind .npy saving,
 * the plots and the CLI's dumps, so a failed or interrupted write never leaves a partial file where
 * a reader (NumPy, a browser, a diff) would take it for a complete one. */
#ifndef RQS_ATOMIC_FILE_H
#define RQS_ATOMIC_FILE_H

#include <stddef.h>

/* One piece of the file's content (len 0: nothing; data may then be NULL). */
typedef struct {
    const void *data;
    size_t len;
} rqs_span;

/* Writes parts[0..n) in order to "<path>.tmp.<pid>", fsyncs it and renames it onto path.
 * The temporary is created with O_EXCL: a planted symlink is never followed, and a concurrent write
 * of the same path from this process fails instead of renaming a half-written file; an existing
 * temporary is therefore never removed (it may not be ours). 0 on success; -1 with a one-line
 * message "<path>: <what> failed: <why>" in err (when err is non-NULL), nothing at path changed and
 * no temporary file left. */
int rqs_write_atomic(const char *path, const rqs_span *parts, size_t n, char *err, size_t errlen);

#endif
