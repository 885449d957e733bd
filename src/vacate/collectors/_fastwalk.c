/* One directory's entries, stat'ed in C: the hot loop of vacate's walker.

   collectors/walk.py keeps the same loop in Python and uses it wherever this optional module
   was not built (no compiler at install time, a remote host given only the collectors); the
   test suite runs the walk both ways and compares. Per entry this makes the same two calls as
   `du` (getdents, fstatat) and no Python object unless the entry is a directory, a file with
   more than one link, a large file or an error: about 1 us per entry instead of about 3. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "_dents.h"

static int is_dot(const char *n) {
    return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0));
}

/* list_dir(fd, thr) -> (dirs, files, apparent, blocks, mtime_ns, atime_ns, links, large,
   errors, read_errno)
   dirs: [(name, (mode, ino, dev, nlink, size, blocks, mtime_ns, atime_ns))]; links: [(dev, ino, size, blocks, mtime_ns, atime_ns, name)] (nlink > 1, not
   counted in the aggregates); large: [(name, size, blocks, mtime_ns, atime_ns, nlink, dev, ino)]
   regular files with size > thr or blocks*512 > thr; errors: [(name, errno)]. The fd (freshly
   opened) is read from its position and not closed. */
static PyObject *list_dir(PyObject *self, PyObject *args) {
    int fd;
    long long thr;
    if (!PyArg_ParseTuple(args, "iL", &fd, &thr))
        return NULL;
    Dents d;
    if (dents_open(&d, fd) < 0)
        return NULL;
    PyObject *dirs = PyList_New(0), *links = PyList_New(0), *large = PyList_New(0),
             *errors = PyList_New(0);
    if (!dirs || !links || !large || !errors)
        goto fail;
    long long files = 0, app = 0, blk = 0, mt = LLONG_MIN, at = LLONG_MIN;
    int read_errno = 0;
    for (;;) {
        struct linux_dirent64 *de;
        struct stat st;
        int rc = 0, serr = 0;
        Py_BEGIN_ALLOW_THREADS
        errno = 0;
        de = dents_next(&d);
        if (de == NULL)
            serr = errno;
        else if (is_dot(de->d_name))
            rc = 0;
        else {
            rc = fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW);
            if (rc != 0)
                serr = errno;
        }
        Py_END_ALLOW_THREADS
        if (de == NULL) {
            read_errno = serr;
            break;
        }
        if (is_dot(de->d_name))
            continue;
        if (serr) {
            PyObject *t = Py_BuildValue("(O&i)", PyUnicode_DecodeFSDefault, de->d_name, serr);
            if (!t || PyList_Append(errors, t) < 0) { Py_XDECREF(t); goto fail; }
            Py_DECREF(t);
            continue;
        }
        long long mns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        long long ans = (long long)st.st_atim.tv_sec * 1000000000LL + st.st_atim.tv_nsec;
        if (S_ISDIR(st.st_mode)) {
            PyObject *t = Py_BuildValue("(O&(kKKkLLLL))", PyUnicode_DecodeFSDefault, de->d_name,
                                        (unsigned long)st.st_mode,
                                        (unsigned long long)st.st_ino,
                                        (unsigned long long)st.st_dev,
                                        (unsigned long)st.st_nlink, (long long)st.st_size,
                                        (long long)st.st_blocks, mns, ans);
            if (!t || PyList_Append(dirs, t) < 0) { Py_XDECREF(t); goto fail; }
            Py_DECREF(t);
            continue;
        }
        files++;
        if (S_ISREG(st.st_mode) && ((long long)st.st_size > thr ||
                                     (long long)st.st_blocks > thr / 512)) {
            PyObject *t = Py_BuildValue("(O&LLLLkKK)", PyUnicode_DecodeFSDefault, de->d_name,
                                        (long long)st.st_size, (long long)st.st_blocks, mns, ans,
                                        (unsigned long)st.st_nlink,
                                        (unsigned long long)st.st_dev,
                                        (unsigned long long)st.st_ino);
            if (!t || PyList_Append(large, t) < 0) { Py_XDECREF(t); goto fail; }
            Py_DECREF(t);
        }
        if (st.st_nlink > 1) {
            PyObject *t = Py_BuildValue("(KKLLLLO&)", (unsigned long long)st.st_dev,
                                        (unsigned long long)st.st_ino, (long long)st.st_size,
                                        (long long)st.st_blocks, mns, ans,
                                        PyUnicode_DecodeFSDefault, de->d_name);
            if (!t || PyList_Append(links, t) < 0) { Py_XDECREF(t); goto fail; }
            Py_DECREF(t);
            continue;
        }
        app += st.st_size;
        blk += st.st_blocks;
        if (mns > mt) mt = mns;
        if (ans > at) at = ans;
    }
    dents_close(&d);
    return Py_BuildValue("(NLLLLLNNNi)", dirs, files, app, blk, mt, at, links, large, errors,
                         read_errno);
fail:
    dents_close(&d);
    Py_XDECREF(dirs); Py_XDECREF(links); Py_XDECREF(large); Py_XDECREF(errors);
    return NULL;
}

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
        else if (is_dot(de->d_name))
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
   walk.py _finish's bottom-up pass (kept there in Python as the fallback, compared by the
   tests): `rows` sorted by path, each a list [path, apparent, disk, files, dirs, mtime_ns,
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

static PyMethodDef methods[] = {
    {"list_dir", list_dir, METH_VARARGS, "Stat every entry of an open directory (see walk.py)."},
    {"entries", entries, METH_VARARGS, "One directory's listing for the recognisers (see "
     "recognise/base.py)."},
    {"sum_up", sum_up, METH_VARARGS, "The drill-down's rows added up bottom-up (see walk.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastwalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastwalk(void) { return PyModule_Create(&module); }
