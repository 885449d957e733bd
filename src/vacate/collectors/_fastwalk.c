/* One directory's entries, stat'ed in C: the hot loop of vacate's walker.

   collectors/walk.py keeps the same loop in Python and uses it wherever this optional module
   was not built (no compiler at install time, a remote host given only the collectors); the
   test suite runs the walk both ways and compares. Per entry this makes the same two calls as
   `du` (readdir, fstatat) and no Python object unless the entry is a directory, a file with
   more than one link, a large file or an error: about 1 us per entry instead of about 3. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* list_dir(fd, thr) -> (dirs, files, apparent, blocks, mtime_ns, atime_ns, links, large,
   errors, read_errno)
   dirs: [(name, (mode, ino, dev, nlink, size, blocks, mtime_ns, atime_ns))]; links: [(dev, ino, size, blocks, mtime_ns, atime_ns, name)] (nlink > 1, not
   counted in the aggregates); large: [(name, size, blocks, mtime_ns, atime_ns, nlink, dev, ino)]
   regular files with size > thr or blocks*512 > thr; errors: [(name, errno)]. The fd is not
   closed (a dup is read). */
static PyObject *list_dir(PyObject *self, PyObject *args) {
    int fd;
    long long thr;
    if (!PyArg_ParseTuple(args, "iL", &fd, &thr))
        return NULL;
    int dfd = dup(fd);
    if (dfd < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        int e = errno;
        close(dfd);
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    rewinddir(d);
    PyObject *dirs = PyList_New(0), *links = PyList_New(0), *large = PyList_New(0),
             *errors = PyList_New(0);
    if (!dirs || !links || !large || !errors)
        goto fail;
    long long files = 0, app = 0, blk = 0, mt = LLONG_MIN, at = LLONG_MIN;
    int read_errno = 0;
    for (;;) {
        struct dirent *de;
        struct stat st;
        int rc = 0, serr = 0;
        Py_BEGIN_ALLOW_THREADS
        errno = 0;
        de = readdir(d);
        if (de == NULL)
            serr = errno;
        else if (de->d_name[0] == '.' && (de->d_name[1] == 0 ||
                 (de->d_name[1] == '.' && de->d_name[2] == 0)))
            rc = 0;
        else {
            rc = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW);
            if (rc != 0)
                serr = errno;
        }
        Py_END_ALLOW_THREADS
        if (de == NULL) {
            read_errno = serr;
            break;
        }
        if (de->d_name[0] == '.' && (de->d_name[1] == 0 ||
            (de->d_name[1] == '.' && de->d_name[2] == 0)))
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
    closedir(d);
    return Py_BuildValue("(NLLLLLNNNi)", dirs, files, app, blk, mt, at, links, large, errors,
                         read_errno);
fail:
    closedir(d);
    Py_XDECREF(dirs); Py_XDECREF(links); Py_XDECREF(large); Py_XDECREF(errors);
    return NULL;
}

static PyMethodDef methods[] = {
    {"list_dir", list_dir, METH_VARARGS, "Stat every entry of an open directory (see walk.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastwalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastwalk(void) { return PyModule_Create(&module); }
