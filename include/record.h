/* The record of an item to delete (collectors/_record.c, compiled into _fastwalk): what
   _fastwalk.c's Descent shares with it to record in its record mode (a frame of rows, the
   line buffer, a row added, a line encoded) and the walk Python calls as _fastwalk.record.
   Include after Python.h. */
#ifndef VACATE_RECORD_H
#define VACATE_RECORD_H

#include <stddef.h>
#include <sys/stat.h>

enum { K_FILE, K_DIR, K_SYMLINK, K_FIFO, K_SOCKET, K_CHARDEV, K_BLOCKDEV, K_OTHER, K_SUBVOLUME,
       K_MOUNTPOINT };
typedef struct {
    size_t name;                 /* offset into the frame's names, then (listed) a pointer */
    const char *nm;
    int kind, err;               /* err: fstatat's errno (0: stat'ed) */
    unsigned long long dev, ino, d_ino, nlink;
    long long size, mtime, ctime;
} RRow;

typedef struct {
    int fd;
    unsigned long long dev;
    PyObject *rel;               /* str */
    RRow *rows;
    size_t n, cap;
    char *names;
    size_t nlen, ncap;
    size_t *todo;                /* indexes of directories to enter; taken from the end */
    size_t ntodo;
} RFrame;

typedef struct {
    char *b;
    size_t n, cap;
} RBuf;

/* The frame's rows sorted and its line (entries.py's dir_line) encoded into `o`, with its
   totals: files (what is not a directory), apparent bytes, newest mtime and ctime; 0, or -1
   with an exception set */
int record_line(RFrame *f, RBuf *o, PyObject *encode, long long *files_,
                long long *apparent_, long long *mt_, long long *ct_);

/* The name and lstat of one entry added to the frame's rows; 0, or -1 out of memory (no
   exception set: no GIL needed) */
int record_add(RFrame *f, const char *name, const struct stat *st);

/* _fastwalk.record(fd, dev, mnt, sink, problem, encode) -> None (see _record.c) */
PyObject *record_walk(PyObject *self, PyObject *args);

#endif
