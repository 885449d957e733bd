/* vacate's walker in C. One module, four entry points, each with its one Python caller
   (which keeps the same loop in Python, used where this optional module was not built: no
   compiler at install time, a remote host given only the collectors; the test suite runs
   each both ways and compares):
     Descent   whole subtrees, depth-first         collectors/walk_descent.py (CWalker)
     sum_up    the drill-down's bottom-up sums      collectors/walk_finish.py
     entries   the recognisers' directory listings  recognise/base.py (list_dir)
     record    the record of an item to delete      observing/entries.py (_record.c)
   They share the getdents reader (include/dents.h) and the record's frame and line
   (include/record.h: Descent's record mode writes the same lines as record), so they are
   built and loaded as one: walk_descent.py loads the module (native.load) and checks its
   VERSION, and the other three take it from there (walk_descent.fastwalk). Change the
   signature or the result of any of the four: bump VERSION here and FASTWALK_VERSION there
   (tests/collectors/test_c_modules.py).

   Per entry the walk makes the same two calls as `du` (getdents, fstatat) and no Python
   object unless the entry is a directory, a file with more than one link, a large file or an
   error: about 1 us per entry instead of about 3. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dents.h"
#include "record.h"

/* What this module offers Python (all four entry points above), as a number: walk_descent.py
   checks it (FASTWALK_VERSION) and refuses a build of other sources. Bump both with any
   change of a signature or a result. */
#define VERSION 3

/* entries(fd, cap, FileInfo) -> (dirs, files, listed, truncated, read_errno)
   One directory's listing for the recognisers (recognise/base.py list_dir keeps the same loop
   in Python): at most `cap` entries in readdir order; dirs: [name] (by d_type, else lstat);
   files: {name: FileInfo(name, size, blocks * 512, is_link, mtime, atime, regular)} with the times as
   float seconds made as os.stat_result makes them; an entry whose lstat fails is left out
   (and counted); truncated: a further entry was there. The fd (freshly opened) is read from its
   position and not closed. */
static PyObject *entries(PyObject *self, PyObject *args) {
    int fd;
    long long cap;
    PyTypeObject *info;
    if (!PyArg_ParseTuple(args, "iLO!", &fd, &cap, &PyType_Type, &info))
        return NULL;
    if (!PyType_IsSubtype(info, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "FileInfo must be a tuple type");
        return NULL;
    }
    Dents d;
    if (dents_open(&d, fd) < 0)
        return NULL;
    PyObject *dirs = PyList_New(0), *files = PyDict_New();
    if (!dirs || !files)
        goto fail;
    long long listed = 0;
    int truncated = 0, read_errno = 0;
    for (;;) {
        struct linux_dirent64 *de;
        struct stat st;
        int rc = 0, serr = 0, isdir = 0, dot = 0;
        Py_BEGIN_ALLOW_THREADS
        errno = 0;
        de = dents_next(&d);
        if (de == NULL)
            serr = errno;
        else if (dents_is_dot(de->d_name))
            dot = 1;
        else if (listed < cap) {
            if (de->d_type == DT_DIR)
                isdir = 1;
            else {
                rc = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW);
                if (rc == 0 && S_ISDIR(st.st_mode))
                    isdir = 1;
            }
        }
        Py_END_ALLOW_THREADS
        if (de == NULL) {
            read_errno = serr;
            break;
        }
        if (dot)
            continue;
        if (listed >= cap) {
            truncated = 1;
            break;
        }
        listed++;
        if (rc != 0)
            continue;
        PyObject *name = PyUnicode_DecodeFSDefault(de->d_name);
        if (!name)
            goto fail;
        if (isdir) {
            int bad = PyList_Append(dirs, name) < 0;
            Py_DECREF(name);
            if (bad)
                goto fail;
            continue;
        }
        PyObject *f = info->tp_alloc(info, 7);
        if (!f) { Py_DECREF(name); goto fail; }
        Py_INCREF(name);
        PyTuple_SET_ITEM(f, 0, name);
        PyTuple_SET_ITEM(f, 1, PyLong_FromLongLong((long long)st.st_size));
        PyTuple_SET_ITEM(f, 2, PyLong_FromLongLong((long long)st.st_blocks * 512));
        PyTuple_SET_ITEM(f, 3, PyBool_FromLong(S_ISLNK(st.st_mode)));
        PyTuple_SET_ITEM(f, 4, PyFloat_FromDouble((double)st.st_mtim.tv_sec +
                                                  (double)st.st_mtim.tv_nsec * 1e-9));
        PyTuple_SET_ITEM(f, 5, PyFloat_FromDouble((double)st.st_atim.tv_sec +
                                                  (double)st.st_atim.tv_nsec * 1e-9));
        PyTuple_SET_ITEM(f, 6, PyBool_FromLong(S_ISREG(st.st_mode)));
        int bad = 0;
        for (int i = 1; i < 6; i++)
            if (PyTuple_GET_ITEM(f, i) == NULL)
                bad = 1;
        if (!bad)
            bad = PyDict_SetItem(files, name, f) < 0;
        Py_DECREF(name);
        Py_DECREF(f);
        if (bad)
            goto fail;
    }
    dents_close(&d);
    return Py_BuildValue("(NNLii)", dirs, files, listed, truncated, read_errno);
fail:
    dents_close(&d);
    Py_XDECREF(dirs); Py_XDECREF(files);
    return NULL;
}

/* sum_up(rows, own, root) -> None
   walk_finish.py finish's bottom-up pass (kept there in Python as sum_up_py, compared by
   the tests): `rows` sorted by path, each a list [path, apparent, disk, files, dirs, mtime_ns,
   atime_ns]; `own` maps each path to its row. In reverse order (a subtree is complete before
   it is added to its parent), each row but `root`'s is added to its parent's row (the path up
   to its last "/", or "/"): the four counts summed, the two times the newest. */
static PyObject *sum_up(PyObject *self, PyObject *args) {
    PyObject *rows, *own, *root;
    if (!PyArg_ParseTuple(args, "O!O!U", &PyList_Type, &rows, &PyDict_Type, &own, &root))
        return NULL;
    for (Py_ssize_t i = PyList_GET_SIZE(rows) - 1; i >= 0; i--) {
        PyObject *acc = PyList_GET_ITEM(rows, i);
        if (!PyList_Check(acc) || PyList_GET_SIZE(acc) < 7) {
            PyErr_SetString(PyExc_TypeError, "a row is a list of 7");
            return NULL;
        }
        PyObject *p = PyList_GET_ITEM(acc, 0);
        if (!PyUnicode_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "a row's path is a str");
            return NULL;
        }
        int same = PyUnicode_Compare(p, root);
        if (same == -1 && PyErr_Occurred())
            return NULL;
        if (same == 0)
            continue;
        Py_ssize_t cut = PyUnicode_FindChar(p, '/', 0, PyUnicode_GET_LENGTH(p), -1);
        if (cut == -2)
            return NULL;
        if (cut == -1) {
            PyErr_SetString(PyExc_ValueError, "substring not found");
            return NULL;
        }
        PyObject *parent = cut ? PyUnicode_Substring(p, 0, cut) : PyUnicode_FromString("/");
        if (!parent)
            return NULL;
        PyObject *par = PyDict_GetItemWithError(own, parent);     /* borrowed */
        Py_DECREF(parent);
        if (par == NULL) {
            if (PyErr_Occurred())
                return NULL;
            continue;
        }
        if (!PyList_Check(par) || PyList_GET_SIZE(par) < 7) {
            PyErr_SetString(PyExc_TypeError, "a row is a list of 7");
            return NULL;
        }
        for (int k = 1; k <= 4; k++) {
            PyObject *sum = PyNumber_Add(PyList_GET_ITEM(par, k), PyList_GET_ITEM(acc, k));
            if (!sum)
                return NULL;
            PyList_SetItem(par, k, sum);                              /* steals sum */
        }
        for (int k = 5; k <= 6; k++) {
            PyObject *a = PyList_GET_ITEM(acc, k);
            int newer = PyObject_RichCompareBool(a, PyList_GET_ITEM(par, k), Py_GT);
            if (newer < 0)
                return NULL;
            if (newer) {
                Py_INCREF(a);
                PyList_SetItem(par, k, a);
            }
        }
    }
    Py_RETURN_NONE;
}

/* ---- Descent: a whole subtree, depth-first, in C ---------------------------------------
   walk_loops.py's Walker.descend keeps the same walk in Python (the fallback, compared entry
   for entry by the tests); walk_descent.py's CWalker drives this one. Per directory the
   Python loop costs ~15 us of interpreter work (a dozen calls, a stat tuple per
   subdirectory, the row): at 63,000 directories a CPU second, more than the entries' own
   system calls take. Here a directory costs
   its system calls and the objects that leave (the row, and any subdirectory name, hardlink,
   large file or error); the GIL is released around each getdents64 buffer's worth of calls.

   Descent(fd, path, (size, blocks, mtime_ns, atime_ns), root_dev, subvolumes, skip)
   takes the open directory `fd` (closed by the Descent) at `path` with its own lstat;
   `skip`: None or {directory path: frozenset of names never stat'ed (mountpoints)}.
   step(n, thr, dirs, links, large, warnings) -> (done, entries, bytes_on_disk): lists up to
   `n` more directories, appending to the caller's lists what walk_loops.py's listdir appends:
   dirs: [path, apparent, disk_bytes, files, 1, mtime_ns, atime_ns] per directory; links:
   (dev, ino, size, blocks, mtime_ns, atime_ns, path) per name of a file with nlink > 1 (not
   in the row); large: (path, size, blocks, mtime_ns, atime_ns, nlink, dev, ino) per regular
   file with size > thr or blocks > thr / 512; warnings: (code, path, errno) with code
   "unreadable-dir", "vanished", "unreadable", "changed" or "other-filesystem".
   split(deep) -> [(path, dev, ino)]: pending subdirectories given away (walk_loops.py's tick):
   the older half at every level (at least one at each but the deepest), a level's share
   only where every path is shorter than `deep`. pending() -> [(name, (mode, ino, dev,
   nlink, size, blocks, mtime_ns, atime_ns))]: the deepest level's pending subdirectories
   in readdir order, taken off it (after step(1): the first directory's, for walk.py's
   breadth-first start). close(): every fd closed.

   Descent(..., skip, (cut, sink, encode)): also records every directory of the subtree for
   an entries file (inside an item to delete, entries_fused.py): after listing a directory,
   its rows (every entry's name and lstat, as record.h's frame holds them) sorted and
   encoded as entries.py's dir_line, and sink(rel, line, entries, files, apparent,
   newest_mtime_ns, newest_ctime_ns, subdirs, same_dev) called, rel the directory's path
   from code point `cut` on ("" for the item: path is then shorter), same_dev whether every
   entry is on root_dev. Not called for a directory that could not be read whole (a
   warning says so). */

#define MAX_ENTS (DENTS_BUF / 24 + 1)     /* records a getdents64 buffer can hold */

enum { E_DIR = 1, E_LINK = 2, E_LARGE = 4, E_ERR = 8 };

typedef struct {
    char *name;
    unsigned long long dev, ino;
    unsigned long mode, nlink;
    long long size, blocks, mtime, atime;
} Child;

typedef struct {
    int fd;
    PyObject *path;
    Child *kids;
    Py_ssize_t n, cap;
} Level;

typedef struct {
    unsigned int off;           /* the record's offset in the buffer */
    int kind, err;
    struct stat st;
} Ent;

typedef struct {
    PyObject_HEAD
    Level *levels;
    Py_ssize_t depth, cap;
    unsigned long long root_dev;
    int subvolumes, started, busy;
    PyObject *skip;
    long long dsize, dblocks, dmtime, datime;   /* the first directory's own lstat */
    char *buf;
    Ent *ents;
    PyObject *rec_sink, *rec_encode;   /* recording (see above), or NULL */
    Py_ssize_t rec_cut;
    RFrame rec;                        /* the directory being recorded (fd -1, rel unset) */
    RBuf rec_out;
} Descent;

static long long ns_of(const struct timespec *t) {
    return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static void level_free(Level *L) {
    if (L->fd >= 0)
        close(L->fd);
    L->fd = -1;
    Py_CLEAR(L->path);
    for (Py_ssize_t i = 0; i < L->n; i++)
        PyMem_RawFree(L->kids[i].name);
    PyMem_RawFree(L->kids);
    L->kids = NULL;
    L->n = L->cap = 0;
}

static void descent_close_all(Descent *d) {
    while (d->depth > 0)
        level_free(&d->levels[--d->depth]);
}

static void Descent_dealloc(Descent *d) {
    descent_close_all(d);
    PyMem_RawFree(d->levels);
    PyMem_RawFree(d->buf);
    PyMem_RawFree(d->ents);
    PyMem_RawFree(d->rec.rows);
    PyMem_RawFree(d->rec.names);
    PyMem_RawFree(d->rec_out.b);
    Py_XDECREF(d->rec_sink);
    Py_XDECREF(d->rec_encode);
    Py_XDECREF(d->skip);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

/* path + "/" + name (no "/" added after a path ending in one), name decoded as os.fsdecode */
static PyObject *join(PyObject *path, const char *name) {
    PyObject *n = PyUnicode_DecodeFSDefault(name);
    if (!n)
        return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(path);
    PyObject *r = len > 0 && PyUnicode_READ_CHAR(path, len - 1) == '/'
                      ? PyUnicode_Concat(path, n) : PyUnicode_FromFormat("%U/%U", path, n);
    Py_DECREF(n);
    return r;
}

static int push_level(Descent *d, int fd, PyObject *path) {
    if (d->depth == d->cap) {
        Py_ssize_t cap = d->cap ? d->cap * 2 : 16;
        Level *l = PyMem_RawRealloc(d->levels, cap * sizeof(Level));
        if (!l) { PyErr_NoMemory(); return -1; }
        d->levels = l;
        d->cap = cap;
    }
    Level *L = &d->levels[d->depth++];
    L->fd = fd;
    Py_INCREF(path);
    L->path = path;
    L->kids = NULL;
    L->n = L->cap = 0;
    return 0;
}

static int add_kid(Level *L, const char *name, const struct stat *st) {
    if (L->n == L->cap) {
        Py_ssize_t cap = L->cap ? L->cap * 2 : 8;
        Child *k = PyMem_RawRealloc(L->kids, cap * sizeof(Child));
        if (!k) { PyErr_NoMemory(); return -1; }
        L->kids = k;
        L->cap = cap;
    }
    size_t len = strlen(name) + 1;
    char *copy = PyMem_RawMalloc(len);
    if (!copy) { PyErr_NoMemory(); return -1; }
    memcpy(copy, name, len);
    Child *c = &L->kids[L->n++];
    c->name = copy;
    c->dev = st->st_dev;
    c->ino = st->st_ino;
    c->mode = st->st_mode;
    c->nlink = st->st_nlink;
    c->size = st->st_size;
    c->blocks = st->st_blocks;
    c->mtime = ns_of(&st->st_mtim);
    c->atime = ns_of(&st->st_atim);
    return 0;
}

static int warn(PyObject *warnings, const char *code, PyObject *path, int err) {
    PyObject *t = Py_BuildValue("(sOi)", code, path, err);
    if (!t)
        return -1;
    int r = PyList_Append(warnings, t);
    Py_DECREF(t);
    return r;
}

static int add_row(PyObject *dirs, PyObject *path, long long app, long long disk,
                   long long files, long long mt, long long at) {
    PyObject *row = Py_BuildValue("[OLLLiLL]", path, app, disk, files, 1, mt, at);
    if (!row)
        return -1;
    int r = PyList_Append(dirs, row);
    Py_DECREF(row);
    return r;
}

/* the names in `skip` for this directory, as bytes; NULL and *n = 0 when none */
static char **skip_names(Descent *d, PyObject *path, Py_ssize_t *n, PyObject **keep) {
    *n = 0;
    *keep = NULL;
    if (d->skip == NULL || d->skip == Py_None)
        return NULL;
    PyObject *names = PyDict_GetItemWithError(d->skip, path);     /* borrowed */
    if (names == NULL)
        return NULL;
    PyObject *seq = PySequence_List(names);
    if (!seq)
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(seq);
    PyObject *encoded = PyList_New(k);
    char **out = PyMem_RawMalloc((k + 1) * sizeof(char *));
    if (!encoded || !out) {
        Py_DECREF(seq); Py_XDECREF(encoded); PyMem_RawFree(out);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *b = PyUnicode_EncodeFSDefault(PyList_GET_ITEM(seq, i));
        if (!b) { Py_DECREF(seq); Py_DECREF(encoded); PyMem_RawFree(out); return NULL; }
        PyList_SET_ITEM(encoded, i, b);
        out[i] = PyBytes_AS_STRING(b);
    }
    Py_DECREF(seq);
    *keep = encoded;
    *n = k;
    return out;
}

/* The recorded directory `path`'s line to the sink (see Descent's doc) */
static int rec_emit(Descent *d, PyObject *path) {
    RFrame *f = &d->rec;
    Py_ssize_t subdirs = 0;
    int same = 1;
    for (size_t i = 0; i < f->n; i++) {
        RRow *r = &f->rows[i];
        r->nm = f->names + r->name;
        if (r->kind == K_DIR)
            subdirs++;
        if (r->dev != d->root_dev)
            same = 0;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(path);
    PyObject *rel = len > d->rec_cut ? PyUnicode_Substring(path, d->rec_cut, len)
                                     : PyUnicode_FromString("");
    if (!rel)
        return -1;
    f->rel = rel;
    long long files, apparent, mt, ct;
    int rc = record_line(f, &d->rec_out, d->rec_encode, &files, &apparent, &mt, &ct);
    if (rc == 0) {
        PyObject *res = PyObject_CallFunction(d->rec_sink, "Oy#nLLLLni", rel, d->rec_out.b,
                                              (Py_ssize_t)d->rec_out.n, (Py_ssize_t)f->n,
                                              files, apparent, mt, ct, subdirs, same);
        rc = res ? 0 : -1;
        Py_XDECREF(res);
    }
    f->rel = NULL;
    Py_DECREF(rel);
    return rc;
}

/* List the directory of the top level (its own lstat given): the row, its subdirectories
   onto the level, the rest to the caller's lists (recording: its line to the sink). 0, or
   -1 with an exception set. */
static int list_top(Descent *d, long long dsize, long long dblocks, long long dmt,
                    long long dat, long long thr, PyObject *dirs, PyObject *links,
                    PyObject *large, PyObject *warnings, long long *entries,
                    long long *nbytes) {
    Level *L = &d->levels[d->depth - 1];
    int fd = L->fd;
    PyObject *path = L->path;
    long long files = 0, app = dsize, blk = dblocks, mt = dmt, at = dat;
    Py_ssize_t nskip;
    PyObject *keep;
    char **skip = skip_names(d, path, &nskip, &keep);
    if (skip == NULL && PyErr_Occurred())
        return -1;
    int read_err = 0, rc = 0, nomem = 0;
    RFrame *rec = d->rec_sink ? &d->rec : NULL;
    if (rec)
        rec->n = rec->nlen = 0;
    for (;;) {
        long n;
        Py_ssize_t ne = 0;
        Py_BEGIN_ALLOW_THREADS
        n = dents_fill(fd, d->buf);
        if (n < 0)
            read_err = errno;
        for (long pos = 0; pos < n;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(d->buf + pos);
            pos += de->d_reclen;
            if (dents_is_dot(de->d_name))
                continue;
            int skipped = 0;
            for (Py_ssize_t i = 0; i < nskip; i++)
                if (strcmp(skip[i], de->d_name) == 0)
                    skipped = 1;
            if (skipped)     /* a mountpoint: not even stat'ed (a dead FUSE/NFS hangs it) */
                continue;
            Ent *e = &d->ents[ne];
            e->off = (unsigned int)((char *)de - d->buf);
            if (fstatat(fd, de->d_name, &e->st, AT_SYMLINK_NOFOLLOW) != 0) {
                e->kind = E_ERR;
                e->err = errno;
                ne++;
                continue;
            }
            if (rec && record_add(rec, de->d_name, &e->st) < 0)
                nomem = 1;
            if (S_ISDIR(e->st.st_mode)) {
                e->kind = E_DIR;
                ne++;
                continue;
            }
            files++;
            int kind = 0;
            if (S_ISREG(e->st.st_mode) && ((long long)e->st.st_size > thr ||
                                            (long long)e->st.st_blocks > thr / 512))
                kind = E_LARGE;
            if (e->st.st_nlink > 1)
                kind |= E_LINK;      /* counted once, later (walk_finish.py) */
            else {
                long long m = ns_of(&e->st.st_mtim), a = ns_of(&e->st.st_atim);
                app += e->st.st_size;
                blk += e->st.st_blocks;
                if (m > mt) mt = m;
                if (a > at) at = a;
            }
            if (kind) {
                e->kind = kind;
                ne++;
            }
        }
        Py_END_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < ne && rc == 0; i++) {
            Ent *e = &d->ents[i];
            const char *name = ((struct linux_dirent64 *)(d->buf + e->off))->d_name;
            if (e->kind == E_DIR) {
                rc = add_kid(L, name, &e->st);
                continue;
            }
            PyObject *p = join(path, name);
            if (!p) { rc = -1; break; }
            if (e->kind == E_ERR)
                rc = warn(warnings, e->err == ENOENT ? "vanished" : "unreadable", p, e->err);
            else {
                long long m = ns_of(&e->st.st_mtim), a = ns_of(&e->st.st_atim);
                if (e->kind & E_LARGE) {
                    PyObject *t = Py_BuildValue("(OLLLLkKK)", p, (long long)e->st.st_size,
                                                (long long)e->st.st_blocks, m, a,
                                                (unsigned long)e->st.st_nlink,
                                                (unsigned long long)e->st.st_dev,
                                                (unsigned long long)e->st.st_ino);
                    rc = t ? PyList_Append(large, t) : -1;
                    Py_XDECREF(t);
                }
                if (rc == 0 && (e->kind & E_LINK)) {
                    PyObject *t = Py_BuildValue("(KKLLLLO)", (unsigned long long)e->st.st_dev,
                                                (unsigned long long)e->st.st_ino,
                                                (long long)e->st.st_size,
                                                (long long)e->st.st_blocks, m, a, p);
                    rc = t ? PyList_Append(links, t) : -1;
                    Py_XDECREF(t);
                }
            }
            Py_DECREF(p);
        }
        if (rc == 0 && nomem) {
            PyErr_NoMemory();
            rc = -1;
        }
        if (rc == 0 && n > 0 && PyErr_CheckSignals() < 0)   /* ^C in a huge directory */
            rc = -1;
        if (rc != 0 || n <= 0)
            break;
    }
    PyMem_RawFree(skip);
    Py_XDECREF(keep);
    if (rc != 0)
        return -1;
    if (read_err && warn(warnings, "unreadable-dir", path, read_err) < 0)
        return -1;
    if (rec && !read_err && rec_emit(d, path) < 0)
        return -1;
    if (add_row(dirs, path, app, blk * 512, files, mt, at) < 0)
        return -1;
    *entries += files + 1;
    *nbytes += blk * 512;
    return 0;
}

static int open_dir_at(int dir_fd, const char *name) {
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM)     /* O_NOATIME: only the owner or root may */
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd;
}

static int Descent_init(Descent *d, PyObject *args, PyObject *kw) {
    int fd, subvolumes;
    PyObject *path, *skip, *rec = Py_None;
    unsigned long long root_dev;
    long long size, blocks, mt, at;
    if (!PyArg_ParseTuple(args, "iU(LLLL)KpO|O", &fd, &path, &size, &blocks, &mt, &at,
                          &root_dev, &subvolumes, &skip, &rec))
        return -1;
    if (rec != Py_None) {
        PyObject *sink, *encode;
        if (!PyArg_ParseTuple(rec, "nOO", &d->rec_cut, &sink, &encode))
            return -1;
        if (d->rec_sink != NULL) {
            PyErr_SetString(PyExc_RuntimeError, "a Descent is initialised once");
            return -1;
        }
        Py_INCREF(sink);
        Py_INCREF(encode);
        d->rec_sink = sink;
        d->rec_encode = encode;
        d->rec.fd = -1;
    }
    if (skip != Py_None && !PyDict_Check(skip)) {
        PyErr_SetString(PyExc_TypeError, "skip must be a dict or None");
        return -1;
    }
    if (d->buf != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Descent is initialised once");
        return -1;
    }
    d->buf = PyMem_RawMalloc(DENTS_BUF);
    d->ents = PyMem_RawMalloc(MAX_ENTS * sizeof(Ent));
    if (!d->buf || !d->ents) {
        PyErr_NoMemory();
        return -1;
    }
    d->root_dev = root_dev;
    d->subvolumes = subvolumes;
    Py_INCREF(skip);
    d->skip = skip;
    d->dsize = size;
    d->dblocks = blocks;
    d->dmtime = mt;
    d->datime = at;
    return push_level(d, fd, path);
}

static PyObject *descent_step(Descent *d, Py_ssize_t n, long long thr, PyObject *dirs,
                              PyObject *links, PyObject *large, PyObject *warnings);

static PyObject *Descent_step(Descent *d, PyObject *args) {
    Py_ssize_t n;
    long long thr;
    PyObject *dirs, *links, *large, *warnings;
    if (!PyArg_ParseTuple(args, "nLO!O!O!O!", &n, &thr, &PyList_Type, &dirs, &PyList_Type,
                          &links, &PyList_Type, &large, &PyList_Type, &warnings))
        return NULL;
    if (d->buf == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Descent not initialised");
        return NULL;
    }
    if (d->busy) {       /* another thread is in step() (it lets go of the GIL) */
        PyErr_SetString(PyExc_RuntimeError, "Descent is already stepping");
        return NULL;
    }
    d->busy = 1;
    PyObject *r = descent_step(d, n, thr, dirs, links, large, warnings);
    d->busy = 0;
    return r;
}

static PyObject *descent_step(Descent *d, Py_ssize_t n, long long thr, PyObject *dirs,
                              PyObject *links, PyObject *large, PyObject *warnings) {
    long long entries = 0, nbytes = 0;
    Py_ssize_t listed = 0;
    if (!d->started && d->depth > 0) {
        d->started = 1;
        if (list_top(d, d->dsize, d->dblocks, d->dmtime, d->datime, thr, dirs, links, large,
                     warnings, &entries, &nbytes) < 0)
            return NULL;
        listed++;
    }
    while (listed < n && d->depth > 0) {
        Level *L = &d->levels[d->depth - 1];
        if (L->n == 0) {
            level_free(L);
            d->depth--;
            continue;
        }
        Child c = L->kids[--L->n];
        PyObject *cpath = join(L->path, c.name);
        if (!cpath) {
            PyMem_RawFree(c.name);
            return NULL;
        }
        int rc = 0;
        if (c.dev != d->root_dev && !d->subvolumes)
            rc = warn(warnings, "other-filesystem", cpath, 0);
        else {
            int cfd;
            struct stat fst;
            int err = 0, changed = 0;
            Py_BEGIN_ALLOW_THREADS
            cfd = open_dir_at(L->fd, c.name);
            if (cfd < 0)
                err = errno;
            else if (fstat(cfd, &fst) != 0 || fst.st_dev != c.dev || fst.st_ino != c.ino) {
                close(cfd);
                changed = 1;
            }
            Py_END_ALLOW_THREADS
            if (cfd < 0) {
                if (err == ENOENT)
                    rc = warn(warnings, "vanished", cpath, err);
                else {   /* unreadable: its own inode still counts, as du counts it */
                    rc = warn(warnings, "unreadable-dir", cpath, err);
                    if (rc == 0)
                        rc = add_row(dirs, cpath, c.size, c.blocks * 512, 0, c.mtime, c.atime);
                    entries += 1;
                }
            }
            else if (changed)
                rc = warn(warnings, "changed", cpath, 0);
            else {
                rc = push_level(d, cfd, cpath);
                if (rc < 0)
                    close(cfd);
                else
                    rc = list_top(d, c.size, c.blocks, c.mtime, c.atime, thr, dirs, links,
                                  large, warnings, &entries, &nbytes);
                listed++;
            }
        }
        Py_DECREF(cpath);
        PyMem_RawFree(c.name);
        if (rc < 0)
            return NULL;
    }
    return Py_BuildValue("(OLL)", d->depth == 0 ? Py_True : Py_False, entries, nbytes);
}

static int not_busy(Descent *d) {
    if (d->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Descent is stepping in another thread");
        return 0;
    }
    return 1;
}

static PyObject *Descent_split(Descent *d, PyObject *args) {
    Py_ssize_t deep;
    if (!PyArg_ParseTuple(args, "n", &deep) || !not_busy(d))
        return NULL;
    PyObject *give = PyList_New(0);
    if (!give)
        return NULL;
    Py_ssize_t last = d->depth - 1;
    for (Py_ssize_t i = 0; i < d->depth; i++) {
        Level *L = &d->levels[i];
        Py_ssize_t half = i == last ? L->n / 2 : (L->n + 1) / 2;
        if (half == 0)
            continue;
        PyObject *piece = PyList_New(half);
        if (!piece) { Py_DECREF(give); return NULL; }
        int ok = 1;
        for (Py_ssize_t k = 0; k < half; k++) {
            PyObject *p = join(L->path, L->kids[k].name);
            if (!p) { Py_DECREF(piece); Py_DECREF(give); return NULL; }
            if (PyUnicode_GET_LENGTH(p) >= deep)
                ok = 0;    /* paths too long to open by name stay here */
            PyObject *t = Py_BuildValue("(NKK)", p, L->kids[k].dev, L->kids[k].ino);
            if (!t) { Py_DECREF(piece); Py_DECREF(give); return NULL; }
            PyList_SET_ITEM(piece, k, t);
        }
        if (ok) {
            for (Py_ssize_t k = 0; k < half; k++) {
                if (PyList_Append(give, PyList_GET_ITEM(piece, k)) < 0) {
                    Py_DECREF(piece); Py_DECREF(give); return NULL;
                }
                PyMem_RawFree(L->kids[k].name);
            }
            memmove(L->kids, L->kids + half, (L->n - half) * sizeof(Child));
            L->n -= half;
        }
        Py_DECREF(piece);
    }
    return give;
}

static PyObject *Descent_pending(Descent *d, PyObject *unused) {
    if (!not_busy(d))
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out || d->depth == 0)
        return out;
    Level *L = &d->levels[d->depth - 1];
    for (Py_ssize_t k = 0; k < L->n; k++) {
        Child *c = &L->kids[k];
        PyObject *t = Py_BuildValue("(O&(kKKkLLLL))", PyUnicode_DecodeFSDefault, c->name,
                                    c->mode, c->ino, c->dev, c->nlink, c->size, c->blocks,
                                    c->mtime, c->atime);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    for (Py_ssize_t k = 0; k < L->n; k++)
        PyMem_RawFree(L->kids[k].name);
    L->n = 0;
    return out;
}

static PyObject *Descent_close(Descent *d, PyObject *unused) {
    if (!not_busy(d))
        return NULL;
    descent_close_all(d);
    Py_RETURN_NONE;
}

static PyMethodDef descent_methods[] = {
    {"step", (PyCFunction)Descent_step, METH_VARARGS, "List up to n more directories."},
    {"split", (PyCFunction)Descent_split, METH_VARARGS, "Give away pending directories."},
    {"pending", (PyCFunction)Descent_pending, METH_NOARGS,
     "Take the deepest level's pending subdirectories."},
    {"close", (PyCFunction)Descent_close, METH_NOARGS, "Close every directory still open."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DescentType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "vacate.observing.collectors._fastwalk.Descent",
    .tp_basicsize = sizeof(Descent),
    .tp_dealloc = (destructor)Descent_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A subtree walked depth-first in C (see walk_descent.py CWalker).",
    .tp_methods = descent_methods,
    .tp_init = (initproc)Descent_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"entries", entries, METH_VARARGS, "One directory's listing for the recognisers (see "
     "recognise/base.py)."},
    {"record", record_walk, METH_VARARGS, "An item to delete recorded (see _record.c)."},
    {"sum_up", sum_up, METH_VARARGS, "The drill-down's rows added up bottom-up (see walk_finish.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastwalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastwalk(void) {
    if (PyType_Ready(&DescentType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&DescentType);
    if (PyModule_AddObject(m, "Descent", (PyObject *)&DescentType) < 0) {
        Py_DECREF(&DescentType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
