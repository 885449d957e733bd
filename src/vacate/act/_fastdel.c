/* The delete's loop over one directory in C: act/delete.py's _Deleter.fill, entry for entry
   (the Python loop is kept there and runs wherever this optional module was not built, on a
   far host, or with VACATE_NO_C=1; the tests delete the same trees both ways and compare).

   empty(fd, rows) -> (removed, nbytes, blocks, dirs, kept, errors)
   Lists the open directory `fd` (freshly opened; read from its position, not closed), every
   entry before anything is removed, and takes the entries in inode order. Each one is
   lstat'ed (fstatat, AT_SYMLINK_NOFOLLOW) and looked up by name in `rows` (the directory's
   recorded rows: lists or tuples (name, kind, dev, ino, size, mtime_ns, ctime_ns, nlink), or
   None where it has none):
   - not recorded: kept, as (name, None, ident);
   - a directory: recorded as a directory kind ("dir", "subvolume", "mountpoint"), it goes to
     `dirs` as (name, (dev, ino), row) for the caller to enter; otherwise kept (name, row,
     ident);
   - anything else: unlinked (unlinkat) when it is still the recorded one, else kept
     (name, row, ident). Still the recorded one: device, inode, size, mtime and ctime all
     equal; or else the same device, inode, kind, size and mtime with a ctime that moved
     only because the link count went down (delete.py's _changed, which also says why).
   `ident` is (dev, ino, mode, size, mtime_ns, ctime_ns, nlink) as lstat found it.
   `errors`: (code, name, errno) for an entry that could not be stat'ed ("unreadable") or
   unlinked ("unlink-failed"). An entry gone meanwhile (ENOENT) is passed over. `removed`,
   `nbytes`, `blocks`: the entries unlinked, and the size and 512-byte blocks of those that
   were their file's last name. A listing that fails raises OSError with nothing removed.
   Per entry: a getdents record, an fstatat, an unlinkat and a dict lookup; no Python object
   but the name. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dents.h"

/* What this module offers Python, as a number: delete.py checks it (FASTDEL_VERSION) and
   refuses a build of other sources. Bump both with any change of a signature or a result. */
#define VERSION 1

typedef struct {
    unsigned long long ino;
    size_t at;                   /* the name's offset in the listing's names */
    size_t seq;                  /* its place in the listing: equal inodes keep their order */
} Ent;

typedef struct {
    Ent *ents;
    size_t n, cap;
    char *names;
    size_t used, room;
} Listing;

static void listing_free(Listing *l) {
    PyMem_RawFree(l->ents);
    PyMem_RawFree(l->names);
}

static int by_inode(const void *a, const void *b) {
    const Ent *x = a, *y = b;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every entry of `fd` but . and .., in inode order. 0, or -1 with an exception set. */
static int list_dir(int fd, Listing *l) {
    Dents d;
    if (dents_open(&d, fd) < 0)
        return -1;
    for (;;) {
        errno = 0;
        struct linux_dirent64 *de = dents_next(&d);
        if (de == NULL) {
            int err = errno;
            dents_close(&d);
            if (err) {
                errno = err;
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            break;
        }
        const char *nm = de->d_name;
        if (dents_is_dot(nm))
            continue;
        size_t len = strlen(nm) + 1;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 256;
            Ent *e = PyMem_RawRealloc(l->ents, cap * sizeof(Ent));
            if (!e)
                goto nomem;
            l->ents = e;
            l->cap = cap;
        }
        if (l->used + len > l->room) {
            size_t room = l->room ? 2 * l->room : 16384;
            while (room < l->used + len)
                room *= 2;
            char *b = PyMem_RawRealloc(l->names, room);
            if (!b)
                goto nomem;
            l->names = b;
            l->room = room;
        }
        memcpy(l->names + l->used, nm, len);
        l->ents[l->n] = (Ent){de->d_ino, l->used, l->n};
        l->n++;
        l->used += len;
    }
    if (l->n > 1)
        qsort(l->ents, l->n, sizeof(Ent), by_inode);
    return 0;
nomem:
    dents_close(&d);
    PyErr_NoMemory();
    return -1;
}

/* The kind a row names for a mode, as entries.py's KIND_OF_MODE says it. */
static const char *kind_of_mode(mode_t m) {
    switch (m & S_IFMT) {
    case S_IFREG: return "file";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "symlink";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "socket";
    case S_IFCHR: return "chardev";
    case S_IFBLK: return "blockdev";
    default: return "other";
    }
}

static int kind_is(PyObject *kind, const char *want) {
    return PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, want) == 0;
}

/* Field `i` of a row equals `v` (a value that is not an int in range equals nothing). */
static int field_is(PyObject *r, Py_ssize_t i, long long v, int is_unsigned) {
    PyObject *o = PySequence_Fast_GET_ITEM(r, i);
    if (!PyLong_Check(o))
        return 0;
    int eq;
    if (is_unsigned) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        eq = !(u == (unsigned long long)-1 && PyErr_Occurred()) && u == (unsigned long long)v;
    } else {
        long long s = PyLong_AsLongLong(o);
        eq = !(s == -1 && PyErr_Occurred()) && s == v;
    }
    PyErr_Clear();
    return eq;
}

enum { R_NAME, R_KIND, R_DEV, R_INO, R_SIZE, R_MTIME, R_CTIME, R_NLINK, R_FIELDS };

static long long ns(struct timespec t) {
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The non-directory `st` is still the recorded row `r` (see the top of this file). */
static int still_recorded(PyObject *r, const struct stat *st) {
    int dev = field_is(r, R_DEV, (long long)st->st_dev, 1);
    int ino = field_is(r, R_INO, (long long)st->st_ino, 1);
    int size = field_is(r, R_SIZE, (long long)st->st_size, 0);
    int mtime = field_is(r, R_MTIME, ns(st->st_mtim), 0);
    if (dev && ino && size && mtime && field_is(r, R_CTIME, ns(st->st_ctim), 0))
        return 1;
    if (!(dev && ino && size && mtime && kind_is(PySequence_Fast_GET_ITEM(r, R_KIND),
                                                  kind_of_mode(st->st_mode))))
        return 0;
    /* only the ctime differs: the same file when its link count went down */
    PyObject *o = PySequence_Fast_GET_ITEM(r, R_NLINK);
    if (!PyLong_Check(o))
        return 0;
    int over = 0;
    long long nlink = PyLong_AsLongLongAndOverflow(o, &over);
    if (nlink == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return over > 0 || (over == 0 && (long long)st->st_nlink < nlink);
}

static PyObject *ident(const struct stat *st) {
    return Py_BuildValue("(KKILLLK)", (unsigned long long)st->st_dev,
                         (unsigned long long)st->st_ino, (unsigned int)st->st_mode,
                         (long long)st->st_size, ns(st->st_mtim), ns(st->st_ctim),
                         (unsigned long long)st->st_nlink);
}

/* name -> row for the rows given (the last of a name, as a dict built in Python keeps). */
static PyObject *rows_by_name(PyObject *rows) {
    PyObject *by = PyDict_New();
    if (!by || rows == Py_None)
        return by;
    PyObject *seq = PySequence_Fast(rows, "rows must be a sequence");
    if (!seq)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (!(PyList_Check(r) || PyTuple_Check(r)) || PySequence_Fast_GET_SIZE(r) < R_FIELDS) {
            PyErr_SetString(PyExc_TypeError, "a row is a list or tuple of 8");
            Py_DECREF(seq);
            goto fail;
        }
        if (PyDict_SetItem(by, PySequence_Fast_GET_ITEM(r, R_NAME), r) < 0) {
            Py_DECREF(seq);
            goto fail;
        }
    }
    Py_DECREF(seq);
    return by;
fail:
    Py_DECREF(by);
    return NULL;
}

static int add(PyObject *list, PyObject *item) {      /* steals item */
    if (!item)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *empty(PyObject *self, PyObject *args) {
    int fd;
    PyObject *rows;
    if (!PyArg_ParseTuple(args, "iO", &fd, &rows))
        return NULL;
    PyObject *by = rows_by_name(rows);
    if (!by)
        return NULL;
    Listing l = {0};
    if (list_dir(fd, &l) < 0) {
        Py_DECREF(by);
        return NULL;
    }
    PyObject *dirs = PyList_New(0), *kept = PyList_New(0), *errors = PyList_New(0);
    PyObject *name = NULL;
    long long removed = 0, nbytes = 0, blocks = 0;
    if (!dirs || !kept || !errors)
        goto fail;
    for (size_t i = 0; i < l.n; i++) {
        const char *nm = l.names + l.ents[i].at;
        struct stat st;
        if (fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            int err = errno;
            if (err == ENOENT)
                continue;
            if (add(errors, Py_BuildValue("(sNi)", "unreadable", PyUnicode_DecodeFSDefault(nm),
                                          err)) < 0)
                goto fail;
            continue;
        }
        name = PyUnicode_DecodeFSDefault(nm);
        if (!name)
            goto fail;
        PyObject *r = PyDict_GetItemWithError(by, name);           /* borrowed */
        if (r == NULL && PyErr_Occurred())
            goto fail;
        if (r == NULL) {
            if (add(kept, Py_BuildValue("(OON)", name, Py_None, ident(&st))) < 0)
                goto fail;
        } else if (S_ISDIR(st.st_mode)) {
            PyObject *kind = PySequence_Fast_GET_ITEM(r, R_KIND);
            int is_dir = kind_is(kind, "dir") || kind_is(kind, "subvolume") ||
                         kind_is(kind, "mountpoint");
            if (is_dir ? add(dirs, Py_BuildValue("(O(KK)O)", name,
                                                 (unsigned long long)st.st_dev,
                                                 (unsigned long long)st.st_ino, r)) < 0
                       : add(kept, Py_BuildValue("(OON)", name, r, ident(&st))) < 0)
                goto fail;
        } else if (!still_recorded(r, &st)) {
            if (add(kept, Py_BuildValue("(OON)", name, r, ident(&st))) < 0)
                goto fail;
        } else if (unlinkat(fd, nm, 0) != 0) {
            int err = errno;
            if (err != ENOENT &&
                add(errors, Py_BuildValue("(sOi)", "unlink-failed", name, err)) < 0)
                goto fail;
        } else {
            removed++;
            if (st.st_nlink <= 1) {
                nbytes += st.st_size;
                blocks += st.st_blocks;
            }
        }
        Py_CLEAR(name);
    }
    listing_free(&l);
    Py_DECREF(by);
    return Py_BuildValue("(LLLNNN)", removed, nbytes, blocks, dirs, kept, errors);
fail:
    listing_free(&l);
    Py_DECREF(by);
    Py_XDECREF(name);
    Py_XDECREF(dirs);
    Py_XDECREF(kept);
    Py_XDECREF(errors);
    return NULL;
}

static PyMethodDef methods[] = {
    {"empty", empty, METH_VARARGS, "empty(fd, rows) -> (removed, nbytes, blocks, dirs, kept, "
                                   "errors): one directory's recorded entries removed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastdel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastdel(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
