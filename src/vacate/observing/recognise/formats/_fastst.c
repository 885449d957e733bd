/* The safetensors header's tensor table as columns, checked, in C: the hot loop of reading a
   hub cache's headers (hundreds of thousands of tensors; in Python each costs several times
   what decoding its JSON did).

   recognise/formats/safetensors.py keeps the same checks in Python (_columns) and uses them
   wherever this optional module was not built; the test suite compares the two on real and on
   broken headers. Anything this loop does not accept gives None, and the Python code then goes
   through the tensors one by one to say what is wrong: this module only ever says "all well". */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* What this module offers Python, as a number: safetensors.py checks it (FASTST_VERSION) and
   refuses a build of other sources. Bump both with any change of a signature or a result. */
#define VERSION 1

static PyObject *k_dtype, *k_shape, *k_offsets;

#define MAX_DIMS 16
#define DIM_LIMIT (1LL << 48)
#define OFFSET_LIMIT (1LL << 56)
#define NUMEL_CAP ((unsigned __int128)1 << 62) /* past it no tensor fits below OFFSET_LIMIT */

/* 0 and *out set: a Python int in [0, limit); -1: anything else (no exception left set) */
static int bounded(PyObject *x, long long limit, long long *out) {
    if (!PyLong_Check(x))
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow || v < 0 || v >= limit)
        return -1;
    *out = v;
    return 0;
}

/* columns(obj, bits) -> (names, dtypes, numels, shapes, offsets, data_len, by_dtype) or None
   obj: the header's JSON object without "__metadata__" ({name: {"dtype", "shape",
   "data_offsets"}}); bits: {dtype: bits per element}. Each column a tuple in the object's
   order; shapes and offsets are the lists as given; data_len the largest end offset; by_dtype
   {dtype: elements} in the order the dtypes are met. None when
   any tensor is not right (see safetensors._tensor for what "right" is). */
static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *obj, *bits;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &obj, &PyDict_Type, &bits))
        return NULL;
    Py_ssize_t n = PyDict_GET_SIZE(obj);
    PyObject *names = PyTuple_New(n), *dtypes = PyTuple_New(n), *numels = PyTuple_New(n),
             *shapes = PyTuple_New(n), *offsets = PyTuple_New(n), *by = PyDict_New();
    if (!names || !dtypes || !numels || !shapes || !offsets || !by)
        goto fail;
    Py_ssize_t pos = 0, i = 0;
    PyObject *name, *t;
    long long data_len = 0;
    while (PyDict_Next(obj, &pos, &name, &t)) {
        if (!PyDict_Check(t))
            goto bad;
        PyObject *dt = PyDict_GetItemWithError(t, k_dtype);
        if (dt == NULL || !PyUnicode_CheckExact(dt))
            goto bad_or_fail;
        PyObject *b = PyDict_GetItemWithError(bits, dt);
        if (b == NULL)
            goto bad_or_fail;
        long long nbits;
        if (bounded(b, 1 << 10, &nbits) < 0)
            goto bad;
        PyObject *sh = PyDict_GetItemWithError(t, k_shape);
        if (sh == NULL || !PyList_Check(sh) || PyList_GET_SIZE(sh) > MAX_DIMS)
            goto bad_or_fail;
        unsigned __int128 numel = 1;
        int zero = 0;
        for (Py_ssize_t d = 0; d < PyList_GET_SIZE(sh); d++) {
            long long v;
            if (bounded(PyList_GET_ITEM(sh, d), DIM_LIMIT, &v) < 0)
                goto bad;
            if (v == 0)
                zero = 1;
            numel *= (unsigned long long)v;
            if (numel > NUMEL_CAP)
                numel = NUMEL_CAP;
        }
        if (zero)
            numel = 0;
        PyObject *off = PyDict_GetItemWithError(t, k_offsets);
        if (off == NULL || !PyList_Check(off) || PyList_GET_SIZE(off) != 2)
            goto bad_or_fail;
        long long begin, end;
        if (bounded(PyList_GET_ITEM(off, 0), OFFSET_LIMIT, &begin) < 0 ||
            bounded(PyList_GET_ITEM(off, 1), OFFSET_LIMIT, &end) < 0 || begin > end)
            goto bad;
        if ((numel * (unsigned long long)nbits + 7) / 8 != (unsigned __int128)(end - begin))
            goto bad;
        PyObject *num = PyLong_FromUnsignedLongLong((unsigned long long)numel);
        if (num == NULL)
            goto fail;
        PyObject *had = PyDict_GetItemWithError(by, dt), *sum;
        if (had == NULL && PyErr_Occurred()) {
            Py_DECREF(num);
            goto fail;
        }
        if (had == NULL) {
            sum = num;
            Py_INCREF(sum);
        } else
            sum = PyNumber_Add(had, num);
        if (sum == NULL || PyDict_SetItem(by, dt, sum) < 0) {
            Py_XDECREF(sum);
            Py_DECREF(num);
            goto fail;
        }
        Py_DECREF(sum);
        Py_INCREF(name);
        PyTuple_SET_ITEM(names, i, name);
        Py_INCREF(dt);
        PyTuple_SET_ITEM(dtypes, i, dt);
        PyTuple_SET_ITEM(numels, i, num);
        Py_INCREF(sh);
        PyTuple_SET_ITEM(shapes, i, sh);
        Py_INCREF(off);
        PyTuple_SET_ITEM(offsets, i, off);
        if (end > data_len)
            data_len = end;
        i++;
    }
    if (i != n)      /* the object changed while read: not from json */
        goto bad;
    return Py_BuildValue("(NNNNNLN)", names, dtypes, numels, shapes, offsets, data_len, by);
bad_or_fail:
    if (PyErr_Occurred())
        goto fail;
bad:
    Py_XDECREF(names); Py_XDECREF(dtypes); Py_XDECREF(numels); Py_XDECREF(shapes);
    Py_XDECREF(offsets); Py_XDECREF(by);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(names); Py_XDECREF(dtypes); Py_XDECREF(numels); Py_XDECREF(shapes);
    Py_XDECREF(offsets); Py_XDECREF(by);
    return NULL;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS,
     "columns(obj, bits) -> (names, dtypes, numels, shapes, offsets, data_len, by_dtype) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastst", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastst(void) {
    k_dtype = PyUnicode_InternFromString("dtype");
    k_shape = PyUnicode_InternFromString("shape");
    k_offsets = PyUnicode_InternFromString("data_offsets");
    if (!k_dtype || !k_shape || !k_offsets)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
