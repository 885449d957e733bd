/* The first look over /proc (collectors/procs_probe.py) in C, on threads that run without
   the GIL: which processes *may* use the volume.

   procs_probe.py keeps the same look in Python and uses it wherever this optional module was
   not built; the test suite runs both over the real /proc and compares them pid for pid.
   Per process this makes the calls fuser makes (the links exe, cwd, root and every fd, one
   read of maps), plus the mount namespace link, each relative to an open /proc/PID directory
   (no path walk from / per call). The threads take the pids a few at a time from one cursor;
   started from the console-script entry they run while Python imports the rest of vacate, and
   the thread that asks for the result (the interpreter's, its imports done) takes what is
   left alongside them.

   probe(proc, pids, hot, tokens, self_ns, live, nthreads) -> Job, already running;
   Job.result() -> (candidates, namespaces, count): candidates in no particular order,
   namespaces [(ns link text, a pid seen in it)] (one per namespace and thread; the lowest
   pid of each is what probe() reports), count the processes read. The rules are those of
   procs_probe.probe(), line for line. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dents.h"

/* What this module offers Python, as a number: procs_probe.py checks it (FASTPROC_VERSION)
   and refuses a build of other sources. Bump both with any change of a signature or a
   result. */
#define VERSION 1

#define PF_KTHREAD 0x00200000

#define LINK_MAX_LEN 4096

enum { NOT_HIT = 0, HIT = 1, KTHREAD = 2, VANISHED = -1, FAILED = -2 };

typedef struct {
    char **hot;       /* mountpoints (fs-encoded), prefixes of a link text */
    size_t *hot_len;
    int n_hot;
    char **tok;       /* " MM:mm " as maps print the volume's device */
    size_t *tok_len;
    int n_tok;
    char *self_ns;    /* NULL: no namespace test (a captured tree) */
    int live;
    char proc[PATH_MAX];
} Query;

typedef struct {
    char text[64];
    int pid;
} NsSeen;

typedef struct {
    const Query *q;
    const int *pids;
    Py_ssize_t n_pids;
    Py_ssize_t *next; /* the job's cursor: the next pid index not yet taken by any share */
    int *cands;
    Py_ssize_t n_cands;
    NsSeen *ns;
    int n_ns, cap_ns;
    long count;
    int oom;
    char *buf;        /* maps text; grows */
    size_t buf_cap;
} Share;

static int vanished(int e) { return e == ENOENT || e == ESRCH; }

static int status_of(int e) { return vanished(e) ? VANISHED : FAILED; }

/* Link text of `name` under dirfd `d` into out (NUL-terminated); length or -errno. */
static ssize_t link_at(int d, const char *name, char *out) {
    ssize_t n = readlinkat(d, name, out, LINK_MAX_LEN - 1);
    if (n < 0)
        return -errno;
    out[n] = 0;
    return n;
}

static int suspicious(const Query *q, const char *t, size_t n) {
    static const char deleted[] = " (deleted)";
    size_t dl = sizeof(deleted) - 1;
    if (n >= dl && memcmp(t + n - dl, deleted, dl) == 0)
        return 1;
    for (int i = 0; i < q->n_hot; i++)
        if (n >= q->hot_len[i] && memcmp(t, q->hot[i], q->hot_len[i]) == 0)
            return 1;
    return 0;
}

/* The whole of `name` under `d` into the share's buffer; length or -errno. */
static ssize_t read_at(Share *s, int d, const char *name) {
    int f = openat(d, name, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return -errno;
    size_t len = 0;
    for (;;) {
        if (s->buf_cap - len < 65536) {
            size_t cap = s->buf_cap ? s->buf_cap * 2 : 262144;
            char *nb = realloc(s->buf, cap);
            if (nb == NULL) {
                close(f);
                s->oom = 1;
                return -ENOMEM;
            }
            s->buf = nb;
            s->buf_cap = cap;
        }
        ssize_t n = read(f, s->buf + len, s->buf_cap - len - 1);
        if (n < 0) {
            int e = errno;
            close(f);
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(f);
    s->buf[len] = 0;
    return (ssize_t)len;
}

/* 1: a kernel thread, 0: not, <0: a status. */
static int kthread(Share *s, int d) {
    ssize_t n = read_at(s, d, "stat");
    if (n < 0)
        return status_of((int)-n);
    char *p = NULL;
    for (ssize_t i = n - 1; i >= 0; i--)
        if (s->buf[i] == ')') {
            p = s->buf + i + 1;
            break;
        }
    if (p == NULL)
        return 0;
    /* fields after the command: state ppid pgrp session tty_nr tpgid flags */
    for (int field = 0; field < 7; field++) {
        while (*p == ' ')
            p++;
        if (*p == 0)
            return 0;
        if (field == 6)
            return (strtoul(p, NULL, 10) & PF_KTHREAD) != 0;
        while (*p && *p != ' ')
            p++;
    }
    return 0;
}

/* procs_probe._looks: HIT, NOT_HIT, KTHREAD, or a failure status. */
static int looks(Share *s, int d) {
    const Query *q = s->q;
    char t[LINK_MAX_LEN];
    ssize_t n = link_at(d, "exe", t);
    if (n == -ENOENT) {
        int k = kthread(s, d);
        if (k < 0)
            return k;
        if (k)
            return KTHREAD;
        t[0] = 0;              /* a zombie, or a process giving up its memory */
        n = 0;
    } else if (n < 0) {
        return status_of((int)-n);
    }
    if (n > 0 && suspicious(q, t, (size_t)n))
        return HIT;
    static const char *const dirs[] = {"cwd", "root"};
    for (int i = 0; i < 2; i++) {
        n = link_at(d, dirs[i], t);
        if (n == -ENOENT)
            continue;
        if (n < 0)
            return status_of((int)-n);
        if (suspicious(q, t, (size_t)n))
            return HIT;
    }
    int fdd = openat(d, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdd < 0)
        return status_of(errno);
    char dents[16384];
    int hit = 0, failed = 0;
    for (;;) {
        long got = syscall(SYS_getdents64, fdd, dents, sizeof dents);
        if (got < 0) {
            failed = status_of(errno);
            break;
        }
        if (got == 0)
            break;
        for (long off = 0; off < got && !hit;) {
            struct linux_dirent64 *e = (void *)(dents + off);
            off += e->d_reclen;
            if (e->d_name[0] == '.')
                continue;
            n = link_at(fdd, e->d_name, t);
            if (n == -ENOENT)
                continue;      /* closed meanwhile */
            if (n < 0) {
                failed = status_of((int)-n);
                break;
            }
            if (t[0] == '/' && suspicious(q, t, (size_t)n))
                hit = 1;
        }
        if (hit || failed)
            break;
    }
    close(fdd);
    if (failed)
        return failed;
    if (hit)
        return HIT;
    n = read_at(s, d, "maps");
    if (n < 0)
        return status_of((int)-n);
    for (int i = 0; i < q->n_tok; i++)
        if (memmem(s->buf, (size_t)n, q->tok[i], q->tok_len[i]) != NULL)
            return HIT;
    return NOT_HIT;
}

static void add_cand(Share *s, int pid) { s->cands[s->n_cands++] = pid; }

static void note_ns(Share *s, const char *text, int pid) {
    for (int i = 0; i < s->n_ns; i++)
        if (strcmp(s->ns[i].text, text) == 0)
            return;
    if (s->n_ns == s->cap_ns) {
        int cap = s->cap_ns ? s->cap_ns * 2 : 16;
        NsSeen *nn = realloc(s->ns, sizeof(NsSeen) * (size_t)cap);
        if (nn == NULL) {
            s->oom = 1;
            return;
        }
        s->ns = nn;
        s->cap_ns = cap;
    }
    snprintf(s->ns[s->n_ns].text, sizeof s->ns[s->n_ns].text, "%s", text);
    s->ns[s->n_ns++].pid = pid;
}

/* procs_probe.probe, for one pid. */
static void probe_pid(Share *s, int pid) {
    const Query *q = s->q;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%d", q->proc, pid);
    int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        if (!vanished(errno))
            add_cand(s, pid);
        return;
    }
    if (q->live) {
        char ns[LINK_MAX_LEN];
        ssize_t n = link_at(d, "ns/mnt", ns);
        if (n < 0) {
            if (!vanished((int)-n))
                add_cand(s, pid);
            close(d);
            return;
        }
        note_ns(s, ns, pid);
        if (q->self_ns == NULL || strcmp(ns, q->self_ns) != 0) {
            /* another mount namespace: read in full, unless a kernel thread */
            s->count++;
            char t[LINK_MAX_LEN];
            n = link_at(d, "exe", t);
            if (n >= 0) {
                add_cand(s, pid);
            } else if (n != -ENOENT) {
                if (!vanished((int)-n))
                    add_cand(s, pid);
            } else {
                int k = kthread(s, d);
                if (k == FAILED || k == 0)
                    add_cand(s, pid);
            }
            close(d);
            return;
        }
    }
    int r = looks(s, d);
    close(d);
    if (r == VANISHED)
        return;                /* it exited while we looked */
    if (r == FAILED) {
        add_cand(s, pid);      /* the full read reports what went wrong */
        return;
    }
    s->count++;
    if (r == HIT)
        add_cand(s, pid);
}

/* Pids are taken CHUNK at a time from the job's cursor, so that the thread which joins the
   look late (result() called while the threads still run) takes its part of what is left. */
#define CHUNK 8

static void *run_share(void *arg) {
    Share *s = arg;
    for (;;) {
        Py_ssize_t lo = __atomic_fetch_add(s->next, CHUNK, __ATOMIC_RELAXED);
        if (lo >= s->n_pids)
            break;
        Py_ssize_t hi = lo + CHUNK < s->n_pids ? lo + CHUNK : s->n_pids;
        for (Py_ssize_t i = lo; i < hi; i++)
            probe_pid(s, s->pids[i]);
    }
    free(s->buf);
    s->buf = NULL;
    return NULL;
}

/* -- the Job object ------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    Query q;
    int *pids;
    Py_ssize_t n_pids;
    Py_ssize_t next;
    int n_threads;
    pthread_t threads[16];
    int started[16];
    Share shares[17];  /* one per thread, and the last for the thread that calls result() */
    int joined;
} Job;

static void free_query(Query *q) {
    for (int i = 0; i < q->n_hot; i++)
        free(q->hot[i]);
    for (int i = 0; i < q->n_tok; i++)
        free(q->tok[i]);
    free(q->hot);
    free(q->hot_len);
    free(q->tok);
    free(q->tok_len);
    free(q->self_ns);
    memset(q, 0, sizeof *q);
}

static void join_all(Job *j) {
    if (j->joined)
        return;
    Py_BEGIN_ALLOW_THREADS
    /* this thread takes what the threads have not yet taken (all of it, where none started) */
    run_share(&j->shares[j->n_threads]);
    for (int i = 0; i < j->n_threads; i++)
        if (j->started[i])
            pthread_join(j->threads[i], NULL);
    Py_END_ALLOW_THREADS
    j->joined = 1;
}

static void job_dealloc(Job *j) {
    join_all(j);
    for (int i = 0; i <= j->n_threads; i++) {
        free(j->shares[i].cands);
        free(j->shares[i].ns);
        free(j->shares[i].buf);
    }
    free(j->pids);
    free_query(&j->q);
    Py_TYPE(j)->tp_free((PyObject *)j);
}

static PyObject *job_result(Job *j, PyObject *Py_UNUSED(ignored)) {
    join_all(j);
    for (int i = 0; i <= j->n_threads; i++)
        if (j->shares[i].oom)
            return PyErr_NoMemory();
    PyObject *cands = PyList_New(0), *nss = PyList_New(0);
    long count = 0;
    if (!cands || !nss)
        goto fail;
    for (int i = 0; i <= j->n_threads; i++) {
        Share *s = &j->shares[i];
        count += s->count;
        for (Py_ssize_t k = 0; k < s->n_cands; k++) {
            PyObject *v = PyLong_FromLong(s->cands[k]);
            if (!v || PyList_Append(cands, v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
        for (int k = 0; k < s->n_ns; k++) {
            PyObject *v = Py_BuildValue("(y,i)", s->ns[k].text, s->ns[k].pid);
            if (!v || PyList_Append(nss, v) < 0) {
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(v);
        }
    }
    return Py_BuildValue("(NNl)", cands, nss, count);
fail:
    Py_XDECREF(cands);
    Py_XDECREF(nss);
    return NULL;
}

static PyMethodDef job_methods[] = {
    {"result", (PyCFunction)job_result, METH_NOARGS,
     "Wait for the threads: (candidates, [(ns, first pid)], count)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject JobType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "vacate.observing.collectors._fastproc.Job",
    .tp_basicsize = sizeof(Job),
    .tp_dealloc = (destructor)job_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A first look over /proc running on threads of its own.",
    .tp_methods = job_methods,
};

/* A tuple of bytes into malloc'ed copies; -1 with an exception set on failure. */
static int copy_bytes(PyObject *seq, char ***out, size_t **lens, int *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of bytes");
    if (fast == NULL)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(fast);
    *out = calloc((size_t)m + 1, sizeof(char *));
    *lens = calloc((size_t)m + 1, sizeof(size_t));
    *n = 0;
    if (!*out || !*lens) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(fast, i);
        char *data;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(b, &data, &len) < 0) {
            Py_DECREF(fast);
            return -1;
        }
        (*out)[i] = malloc((size_t)len + 1);
        if ((*out)[i] == NULL) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return -1;
        }
        memcpy((*out)[i], data, (size_t)len + 1);
        (*lens)[i] = (size_t)len;
        (*n)++;
    }
    Py_DECREF(fast);
    return 0;
}

static PyObject *probe(PyObject *self, PyObject *args) {
    const char *proc;
    PyObject *pids, *hot, *tokens, *self_ns;
    int live, n_threads;
    if (!PyArg_ParseTuple(args, "yOOOOpi", &proc, &pids, &hot, &tokens, &self_ns, &live,
                          &n_threads))
        return NULL;
    Job *j = PyObject_New(Job, &JobType);
    if (j == NULL)
        return NULL;
    memset((char *)j + sizeof(PyObject), 0, sizeof(Job) - sizeof(PyObject));
    j->joined = 1;             /* nothing to join until the threads start */
    snprintf(j->q.proc, sizeof j->q.proc, "%s", proc);
    j->q.live = live;
    if (copy_bytes(hot, &j->q.hot, &j->q.hot_len, &j->q.n_hot) < 0 ||
        copy_bytes(tokens, &j->q.tok, &j->q.tok_len, &j->q.n_tok) < 0)
        goto fail;
    if (self_ns != Py_None) {
        const char *ns = PyBytes_AsString(self_ns);
        if (ns == NULL || (j->q.self_ns = strdup(ns)) == NULL)
            goto fail;
    }
    PyObject *fast = PySequence_Fast(pids, "pids: expected a sequence of int");
    if (fast == NULL)
        goto fail;
    j->n_pids = PySequence_Fast_GET_SIZE(fast);
    j->pids = malloc(sizeof(int) * (size_t)(j->n_pids + 1));
    if (j->pids == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < j->n_pids; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            goto fail;
        }
        j->pids[i] = (int)v;
    }
    Py_DECREF(fast);
    if (n_threads < 0)
        n_threads = 0;     /* 0: no thread; result() looks at every pid itself */
    if (n_threads > 16)
        n_threads = 16;
    if (n_threads > j->n_pids)
        n_threads = (int)j->n_pids;
    j->n_threads = n_threads;
    for (int i = 0; i <= n_threads; i++) {
        Share *s = &j->shares[i];
        s->q = &j->q;
        s->pids = j->pids;
        s->n_pids = j->n_pids;
        s->next = &j->next;
        s->cands = malloc(sizeof(int) * (size_t)(j->n_pids + 1));
        if (s->cands == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    j->joined = 0;
    for (int i = 0; i < n_threads; i++)
        j->started[i] = pthread_create(&j->threads[i], NULL, run_share, &j->shares[i]) == 0;
    return (PyObject *)j;
fail:
    Py_DECREF(j);
    return NULL;
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS,
     "probe(proc, pids, hot, tokens, self_ns, live, nthreads) -> Job (already running)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastproc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastproc(void) {
    if (PyType_Ready(&JobType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "VERSION", VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
