/* Directory records straight from the kernel (getdents64), for every C module
   (_fastwalk.c and _record.c read with the Dents reader below, or a buffer at a time with
   dents_fill; _fastproc.c walks /proc/PID/fd's records on a buffer of its own; act's
   _fastdel.c lists the directory it deletes from). Include after Python.h. */
#ifndef VACATE_DENTS_H
#define VACATE_DENTS_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A record of getdents64(2), as the kernel lays it out. */
struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Whether the name is "." or ".." (what every listing skips) */
static inline int dents_is_dot(const char *n) {
    return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0));
}

/* Reading a directory's entries straight from the kernel (getdents64) on the caller's fd,
   from its current position (callers hand a freshly opened fd): no dup, fdopendir, lseek or
   second close per directory as a DIR on a dup of it would cost (5 system calls of ~9 per
   directory; a walk makes them for every one of tens of thousands). The fd is not closed. */

#define DENTS_BUF (64 * 1024)

typedef struct {
    int fd;
    long pos, end;
    char *buf;
} Dents;

/* 0, or -1 with MemoryError set */
static inline int dents_open(Dents *d, int fd) {
    d->fd = fd;
    d->pos = d->end = 0;
    d->buf = PyMem_RawMalloc(DENTS_BUF);
    if (d->buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline void dents_close(Dents *d) {
    PyMem_RawFree(d->buf);
    d->buf = NULL;
}

/* One getdents64 call on `fd` into `buf` (DENTS_BUF bytes): the bytes read, 0 at the end,
   -1 with errno set. A directory removed while it is read gives ENOENT: that is its end
   here too, as in glibc's readdir. Needs no GIL. */
static inline long dents_fill(int fd, char *buf) {
    long n = syscall(SYS_getdents64, fd, buf, DENTS_BUF);
    return n < 0 && errno == ENOENT ? 0 : n;
}

/* The next entry; NULL at the end (errno 0) or on an error (errno set). Needs no GIL. */
static inline struct linux_dirent64 *dents_next(Dents *d) {
    if (d->pos >= d->end) {
        long n = dents_fill(d->fd, d->buf);
        if (n <= 0) {
            if (n == 0)
                errno = 0;
            return NULL;
        }
        d->pos = 0;
        d->end = n;
    }
    struct linux_dirent64 *e = (struct linux_dirent64 *)(d->buf + d->pos);
    d->pos += e->d_reclen;
    return e;
}

#endif
