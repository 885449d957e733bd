/* The record of an item to delete, walked in C: observing/entries.py's _Recorder (walk,
   listing, enter) line for line, each directory's line encoded here as entries.py's dir_line
   does (the same bytes: the tests record trees both ways and compare the files). Compiled into
   _fastwalk (pyproject.toml); its declarations in include/record.h.

   record_walk, Python's _fastwalk.record(fd, dev, mnt, sink, problem, encode) -> None
   Walks the open directory `fd` (closed here; the item, already entered, on the filesystem
   `dev` and the mount `mnt`) depth-first, one fd held a level. Per directory, once its
   subdirectories are done: sink(rel, line, entries, files, apparent, newest_mtime_ns,
   newest_ctime_ns) with `line` its dir_line. problem(code, rel, errno_or_text) for what
   _Recorder.problem is told. `encode` is json's encode_basestring_ascii, used for names that
   are not plain printable ASCII (and for every rel), so every escape is json's own. Per entry
   this costs a getdents record, an fstatat and ~100 ns of encoding: no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dents.h"
#include "record.h"

static const char *const KIND_NAMES[] = {"file", "dir", "symlink", "fifo", "socket",
                                         "chardev", "blockdev", "other", "subvolume",
                                         "mountpoint"};

static int kind_of_mode(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return K_FILE;
    case S_IFDIR: return K_DIR;
    case S_IFLNK: return K_SYMLINK;
    case S_IFIFO: return K_FIFO;
    case S_IFSOCK: return K_SOCKET;
    case S_IFCHR: return K_CHARDEV;
    case S_IFBLK: return K_BLOCKDEV;
    default: return K_OTHER;
    }
}


static int rbuf_put(RBuf *o, const char *s, size_t n) {
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n)
            cap *= 2;
        char *b = PyMem_RawRealloc(o->b, cap);
        if (!b) {
            PyErr_NoMemory();
            return -1;
        }
        o->b = b;
        o->cap = cap;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
    return 0;
}

static int rbuf_ull(RBuf *o, unsigned long long v) {
    char t[24];
    int i = 24;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return rbuf_put(o, t + i, 24 - i);
}

static int rbuf_ll(RBuf *o, long long v) {
    if (v >= 0)
        return rbuf_ull(o, (unsigned long long)v);
    if (rbuf_put(o, "-", 1) < 0)
        return -1;
    return rbuf_ull(o, 0ULL - (unsigned long long)v);
}

/* A str as json.dumps(ensure_ascii=True) writes it, by `encode` */
static int rbuf_pystr(RBuf *o, PyObject *s, PyObject *encode) {
    PyObject *q = PyObject_CallFunctionObjArgs(encode, s, NULL);
    if (!q)
        return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_Check(q) ? PyUnicode_AsUTF8AndSize(q, &n) : NULL;
    int rc = u ? rbuf_put(o, u, (size_t)n) : -1;
    if (!u && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "encode must return a str");
    Py_DECREF(q);
    return rc;
}

static int plain_name(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

static int rbuf_name(RBuf *o, const char *nm, PyObject *encode) {
    if (plain_name(nm))
        return rbuf_put(o, "\"", 1) < 0 || rbuf_put(o, nm, strlen(nm)) < 0 ||
               rbuf_put(o, "\"", 1) < 0 ? -1 : 0;
    PyObject *s = PyUnicode_DecodeFSDefault(nm);
    if (!s)
        return -1;
    int rc = rbuf_pystr(o, s, encode);
    Py_DECREF(s);
    return rc;
}

static void rframe_free(RFrame *f) {
    if (f->fd >= 0)
        close(f->fd);
    Py_XDECREF(f->rel);
    PyMem_RawFree(f->rows);
    PyMem_RawFree(f->names);
    PyMem_RawFree(f->todo);
    PyMem_RawFree(f);
}

/* rel + "/" + name (name alone where rel is ""), as entries.join does */
static PyObject *rjoin(PyObject *rel, const char *name) {
    PyObject *n = PyUnicode_DecodeFSDefault(name);
    if (!n || PyUnicode_GET_LENGTH(rel) == 0)
        return n;
    PyObject *out = PyUnicode_FromFormat("%U/%U", rel, n);
    Py_DECREF(n);
    return out;
}

static int rproblem(PyObject *problem, const char *code, PyObject *rel, PyObject *what) {
    if (!what)
        return -1;
    PyObject *r = PyObject_CallFunction(problem, "sOO", code, rel, what);
    Py_DECREF(what);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The device, inode and mount id of the open `fd` (the mount id the one fsio.mount_id reads
   from /proc/self/fdinfo): one statx where it tells the mount id (STATX_MNT_ID, Linux 5.8),
   else fstat and that file; -1 with OSError set when they cannot tell. Needs no GIL until it
   fails. */
static int ridentity(int fd, unsigned long long *dev, unsigned long long *ino,
                     long long *mnt) {
#ifdef STATX_MNT_ID
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_INO | STATX_MNT_ID, &sx) == 0 &&
        (sx.stx_mask & (STATX_INO | STATX_MNT_ID)) == (STATX_INO | STATX_MNT_ID)) {
        *dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        *ino = sx.stx_ino;
        *mnt = (long long)sx.stx_mnt_id;
        return 0;
    }
#endif
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    *dev = st.st_dev;
    *ino = st.st_ino;
    *mnt = -2;          /* not known yet: rmount_id */
    return 0;
}

static long long rmount_id(int fd) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    int i = open(path, O_RDONLY | O_CLOEXEC);
    if (i < 0) {
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
        return -1;
    }
    ssize_t n = read(i, buf, sizeof buf - 1);
    int e = errno;
    close(i);
    if (n < 0) {
        errno = e;
        PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
        return -1;
    }
    buf[n] = 0;
    char *at = strstr(buf, "\nmnt_id:");
    if (!at) {
        PyErr_Format(PyExc_OSError, "%s: no mnt_id", path);
        return -1;
    }
    return strtoll(at + 8, NULL, 10);
}

/* A new row, zeroed, for the entry `name` (no GIL needed: the name goes into the frame's
   names, its offset into the row: made a pointer once the directory is listed, the names no
   longer moving); NULL when out of memory */
static RRow *rpush(RFrame *f, const char *name) {
    size_t len = strlen(name) + 1;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 32;
        RRow *r = PyMem_RawRealloc(f->rows, cap * sizeof *r);
        if (!r)
            return NULL;
        f->rows = r;
        f->cap = cap;
    }
    if (f->nlen + len > f->ncap) {
        size_t cap = f->ncap ? f->ncap * 2 : 1024;
        while (cap < f->nlen + len)
            cap *= 2;
        char *b = PyMem_RawRealloc(f->names, cap);
        if (!b)
            return NULL;
        f->names = b;
        f->ncap = cap;
    }
    memcpy(f->names + f->nlen, name, len);
    RRow *r = &f->rows[f->n++];
    memset(r, 0, sizeof *r);
    r->name = f->nlen;
    f->nlen += len;
    return r;
}

/* The row's kind and identity from the entry's lstat */
static void rstat(RRow *r, const struct stat *st) {
    r->kind = kind_of_mode(st->st_mode);
    r->dev = st->st_dev;
    r->ino = st->st_ino;
    r->size = st->st_size;
    r->mtime = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    r->ctime = (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    r->nlink = st->st_nlink;
}

/* List the open directory `fd` (the directory `rel` on `dev`): a new frame, or NULL with
   *unreadable set (a problem told, fd closed) or an exception set (fd closed). */
static RFrame *rlisting(int fd, PyObject *rel, unsigned long long dev, PyObject *problem,
                        int *unreadable) {
    *unreadable = 0;
    RFrame *f = PyMem_RawCalloc(1, sizeof *f);
    if (!f) {
        close(fd);
        PyErr_NoMemory();
        return NULL;
    }
    f->fd = fd;
    f->dev = dev;
    Py_INCREF(rel);
    f->rel = rel;
    Dents d;
    if (dents_open(&d, fd) < 0) {
        rframe_free(f);
        return NULL;
    }
    int err = 0, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        errno = 0;
        struct linux_dirent64 *de = dents_next(&d);
        if (!de) {
            err = errno;
            break;
        }
        if (dents_is_dot(de->d_name))
            continue;
        RRow *r = rpush(f, de->d_name);
        if (!r) { nomem = 1; break; }
        r->d_ino = de->d_ino;
    }
    if (!err && !nomem) {
        for (size_t i = 0; i < f->n; i++) {
            RRow *r = &f->rows[i];
            struct stat st;
            r->nm = f->names + r->name;
            if (fstatat(fd, r->nm, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                r->err = errno;
                continue;
            }
            if (kind_of_mode(st.st_mode) != K_DIR && (unsigned long long)st.st_dev != dev) {
                r->kind = K_MOUNTPOINT;     /* a file bind-mounted here */
                r->dev = dev;
                r->ino = r->d_ino;
                continue;
            }
            rstat(r, &st);
        }
    }
    Py_END_ALLOW_THREADS
    dents_close(&d);
    if (nomem) {
        rframe_free(f);
        PyErr_NoMemory();
        return NULL;
    }
    if (err) {
        close(f->fd);
        f->fd = -1;
        int rc = rproblem(problem, "unreadable-dir", rel, PyLong_FromLong(err));
        rframe_free(f);
        if (rc == 0)
            *unreadable = 1;
        return NULL;
    }
    /* drop what vanished, tell what could not be stat'ed, note the directories (in listing
       order, as _Recorder.listing does) */
    size_t k = 0, ndirs = 0;
    for (size_t i = 0; i < f->n; i++) {
        RRow *r = &f->rows[i];
        if (r->err == ENOENT)
            continue;
        if (r->err) {
            PyObject *p = rjoin(rel, r->nm);
            int rc = p ? rproblem(problem, "unreadable", p, PyLong_FromLong(r->err)) : -1;
            Py_XDECREF(p);
            if (rc < 0) {
                rframe_free(f);
                return NULL;
            }
            continue;
        }
        if (r->kind == K_DIR)
            ndirs++;
        f->rows[k++] = *r;
    }
    f->n = k;
    if (ndirs) {
        f->todo = PyMem_RawMalloc(ndirs * sizeof *f->todo);
        if (!f->todo) {
            rframe_free(f);
            PyErr_NoMemory();
            return NULL;
        }
        for (size_t i = 0; i < f->n; i++)
            if (f->rows[i].kind == K_DIR)
                f->todo[f->ntodo++] = i;
    }
    return f;
}

/* Enter the listed directory `r` of the frame `f` (its path `crel`): its fd, or -1 where it
   is not walked (*ok 1: its row set as _Recorder.enter sets it, a problem told where one
   was met) or on an exception (*ok 0). */
static int renter(RFrame *f, RRow *r, PyObject *crel, long long mnt, PyObject *problem,
                  int *ok) {
    *ok = 1;
    int kind = r->dev == f->dev ? K_DIR : K_SUBVOLUME;
    r->kind = kind;
    int fd;
    unsigned long long dev = 0, ino = 0;
    long long m = -2;
    int rc, err;
    Py_BEGIN_ALLOW_THREADS
    fd = openat(f->fd, r->nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM)     /* O_NOATIME: only the owner or root may */
        fd = openat(f->fd, r->nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    rc = fd < 0 ? -1 : ridentity(fd, &dev, &ino, &m);
    err = errno;
    Py_END_ALLOW_THREADS
    if (fd < 0) {
        *ok = rproblem(problem, "unreadable-dir", crel, PyLong_FromLong(err)) == 0;
        return -1;
    }
    if (rc < 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        close(fd);
        *ok = 0;
        return -1;
    }
    if (dev != r->dev || ino != r->ino) {
        close(fd);
        *ok = rproblem(problem, "changed", crel,
                       PyUnicode_FromString("replaced while it was being recorded")) == 0;
        return -1;
    }
    if (m == -2)
        m = rmount_id(fd);
    if (m < 0) {
        close(fd);
        *ok = 0;
        return -1;
    }
    if (m != mnt) {
        close(fd);
        r->kind = K_MOUNTPOINT;
        r->dev = f->dev;
        r->ino = r->d_ino;
        r->size = r->mtime = r->ctime = 0;
        r->nlink = 0;
        return -1;
    }
    return fd;
}

static int rcmp(const void *a, const void *b) {
    return strcmp(((const RRow *)a)->nm, ((const RRow *)b)->nm);
}

/* Sort the frame's rows by name as Python sorts str (code points): byte order where every
   name is ASCII, else by the names decoded as os.scandir decodes them. */
static int rsort(RFrame *f) {
    int ascii = 1;
    for (size_t i = 0; i < f->n && ascii; i++)
        for (const unsigned char *s = (const unsigned char *)f->rows[i].nm; *s; s++)
            if (*s > 0x7f) {
                ascii = 0;
                break;
            }
    if (ascii) {
        qsort(f->rows, f->n, sizeof *f->rows, rcmp);
        return 0;
    }
    PyObject *keys = PyList_New((Py_ssize_t)f->n);
    if (!keys)
        return -1;
    for (size_t i = 0; i < f->n; i++) {
        PyObject *k = Py_BuildValue("(Nn)", PyUnicode_DecodeFSDefault(f->rows[i].nm),
                                    (Py_ssize_t)i);
        if (!k) {
            Py_DECREF(keys);
            return -1;
        }
        PyList_SET_ITEM(keys, (Py_ssize_t)i, k);
    }
    RRow *sorted = PyList_Sort(keys) < 0 ? NULL : PyMem_RawMalloc(f->n * sizeof *sorted);
    if (!sorted) {
        Py_DECREF(keys);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < f->n; i++)
        sorted[i] = f->rows[PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(keys, i), 1))];
    Py_DECREF(keys);
    PyMem_RawFree(f->rows);
    f->rows = sorted;
    f->cap = f->n;
    return 0;
}

/* The frame's rows sorted and its line (entries.py's dir_line) encoded into `o`, with its
   totals: files (what is not a directory), apparent bytes, newest mtime and ctime */
int record_line(RFrame *f, RBuf *o, PyObject *encode, long long *files_,
                 long long *apparent_, long long *mt_, long long *ct_) {
    if (rsort(f) < 0)
        return -1;
    o->n = 0;
    if (rbuf_put(o, "[", 1) < 0 || rbuf_pystr(o, f->rel, encode) < 0 || rbuf_put(o, ",[", 2) < 0)
        return -1;
    long long files = 0, apparent = 0, mt = 0, ct = 0;
    for (size_t i = 0; i < f->n; i++) {
        RRow *r = &f->rows[i];
        const char *k = KIND_NAMES[r->kind];
        if ((i && rbuf_put(o, ",", 1) < 0) || rbuf_put(o, "[", 1) < 0 ||
            rbuf_name(o, r->nm, encode) < 0 || rbuf_put(o, ",\"", 2) < 0 ||
            rbuf_put(o, k, strlen(k)) < 0 || rbuf_put(o, "\",", 2) < 0 ||
            rbuf_ull(o, r->dev) < 0 || rbuf_put(o, ",", 1) < 0 ||
            rbuf_ull(o, r->ino) < 0 || rbuf_put(o, ",", 1) < 0 ||
            rbuf_ll(o, r->size) < 0 || rbuf_put(o, ",", 1) < 0 ||
            rbuf_ll(o, r->mtime) < 0 || rbuf_put(o, ",", 1) < 0 ||
            rbuf_ll(o, r->ctime) < 0 || rbuf_put(o, ",", 1) < 0 ||
            rbuf_ull(o, r->nlink) < 0 || rbuf_put(o, "]", 1) < 0)
            return -1;
        if (r->kind != K_DIR && r->kind != K_SUBVOLUME && r->kind != K_MOUNTPOINT)
            files++;
        apparent += r->size;
        if (i == 0 || r->mtime > mt)
            mt = r->mtime;
        if (i == 0 || r->ctime > ct)
            ct = r->ctime;
    }
    if (rbuf_put(o, "]]\n", 3) < 0)
        return -1;
    *files_ = files;
    *apparent_ = apparent;
    *mt_ = mt;
    *ct_ = ct;
    return 0;
}

/* The name and lstat of one entry added to the frame's rows (see rpush) */
int record_add(RFrame *f, const char *name, const struct stat *st) {
    RRow *r = rpush(f, name);
    if (!r)
        return -1;
    rstat(r, st);
    return 0;
}

/* The finished frame's line to `sink` */
static int rsink(RFrame *f, RBuf *o, PyObject *sink, PyObject *encode) {
    long long files, apparent, mt, ct;
    if (record_line(f, o, encode, &files, &apparent, &mt, &ct) < 0)
        return -1;
    PyObject *res = PyObject_CallFunction(sink, "Oy#nLLLL", f->rel, o->b, (Py_ssize_t)o->n,
                                          (Py_ssize_t)f->n, files, apparent, mt, ct);
    if (!res)
        return -1;
    Py_DECREF(res);
    return 0;
}

PyObject *record_walk(PyObject *self, PyObject *args) {
    int fd;
    unsigned long long dev;
    long long mnt;
    PyObject *sink, *problem, *encode;
    if (!PyArg_ParseTuple(args, "iKLOOO", &fd, &dev, &mnt, &sink, &problem, &encode))
        return NULL;
    RBuf o = {NULL, 0, 0};
    size_t depth = 0, cap = 64;
    RFrame **stack = PyMem_RawMalloc(cap * sizeof *stack);
    PyObject *top = PyUnicode_FromString("");
    if (!stack || !top) {
        close(fd);
        PyMem_RawFree(stack);
        Py_XDECREF(top);
        return PyErr_NoMemory();
    }
    int unreadable;
    RFrame *f = rlisting(fd, top, dev, problem, &unreadable);
    Py_DECREF(top);
    if (!f && !unreadable)
        goto fail;
    if (f)
        stack[depth++] = f;
    while (depth) {
        f = stack[depth - 1];
        if (!f->ntodo) {
            depth--;
            close(f->fd);
            f->fd = -1;
            int rc = rsink(f, &o, sink, encode);
            rframe_free(f);
            if (rc < 0 || PyErr_CheckSignals() < 0)
                goto fail;
            continue;
        }
        RRow *r = &f->rows[f->todo[--f->ntodo]];
        PyObject *crel = rjoin(f->rel, r->nm);
        if (!crel)
            goto fail;
        int ok;
        int cfd = renter(f, r, crel, mnt, problem, &ok);
        if (cfd < 0) {
            Py_DECREF(crel);
            if (!ok)
                goto fail;
            continue;
        }
        RFrame *c = rlisting(cfd, crel, r->dev, problem, &unreadable);
        Py_DECREF(crel);
        if (!c) {
            if (!unreadable)
                goto fail;
            continue;
        }
        if (depth == cap) {
            RFrame **s = PyMem_RawRealloc(stack, cap * 2 * sizeof *s);
            if (!s) {
                rframe_free(c);
                PyErr_NoMemory();
                goto fail;
            }
            stack = s;
            cap *= 2;
        }
        stack[depth++] = c;
    }
    PyMem_RawFree(stack);
    PyMem_RawFree(o.b);
    Py_RETURN_NONE;
fail:
    while (depth)
        rframe_free(stack[--depth]);
    PyMem_RawFree(stack);
    PyMem_RawFree(o.b);
    return NULL;
}
