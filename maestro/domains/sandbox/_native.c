/* The sandbox child's few system calls that Python 3.11's os module lacks.
 *
 * unshare, mount, prctl(PR_SET_PDEATHSIG) and libseccomp's filter, each one call with plain
 * arguments. The child never loads ctypes: once _ctypes is in a process, its types are reachable
 * from object.__subclasses__() and a pointer type made from them reads and writes any address
 * with no audit event. Nothing here takes or returns an address.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>

static PyObject *native_unshare(PyObject *self, PyObject *args) {
    int flags;
    if (!PyArg_ParseTuple(args, "i", &flags)) return NULL;
    if (unshare(flags) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *native_mount(PyObject *self, PyObject *args) {
    const char *source, *target, *fstype, *data;
    unsigned long flags;
    if (!PyArg_ParseTuple(args, "zszkz", &source, &target, &fstype, &flags, &data)) return NULL;
    if (mount(source, target, fstype, flags, data) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyObject *native_set_pdeathsig(PyObject *self, PyObject *args) {
    int sig;
    if (!PyArg_ParseTuple(args, "i", &sig)) return NULL;
    if (prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0UL, 0UL, 0UL) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* libseccomp, opened at run time by its soname: no headers or link flags needed to build. */
struct arg_cmp {
    unsigned int arg;
    int op;
    uint64_t datum_a;
    uint64_t datum_b;
};
typedef void *(*init_fn)(uint32_t);
typedef int (*resolve_fn)(const char *);
typedef int (*rule_fn)(void *, uint32_t, int, unsigned int, const struct arg_cmp *);
typedef int (*load_fn)(void *);
typedef void (*release_fn)(void *);

#define MAX_CMPS 6

static void *filter_ctx = NULL;
static load_fn seccomp_load_p = NULL;
static release_fn seccomp_release_p = NULL;

static PyObject *seccomp_error(const char *what, int rc) {
    return PyErr_Format(PyExc_OSError, "%s: %s", what, strerror(rc < 0 ? -rc : rc));
}

/* prepare_filter(default_action, allow_action, rules): build the filter now (libseccomp is
 * opened while files can still be opened); rules is a sequence of (syscall name, comparisons),
 * each comparison (arg, op, datum_a, datum_b). A name this architecture lacks is skipped. */
static PyObject *native_prepare_filter(PyObject *self, PyObject *args) {
    unsigned int default_action, allow_action;
    PyObject *rules;
    if (!PyArg_ParseTuple(args, "IIO", &default_action, &allow_action, &rules)) return NULL;
    if (filter_ctx != NULL) return PyErr_Format(PyExc_RuntimeError, "a filter is already prepared");
    void *lib = dlopen("libseccomp.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return PyErr_Format(PyExc_OSError, "libseccomp.so.2: %s", dlerror());
    init_fn init = (init_fn)dlsym(lib, "seccomp_init");
    resolve_fn resolve = (resolve_fn)dlsym(lib, "seccomp_syscall_resolve_name");
    rule_fn rule_add = (rule_fn)dlsym(lib, "seccomp_rule_add_array");
    seccomp_load_p = (load_fn)dlsym(lib, "seccomp_load");
    seccomp_release_p = (release_fn)dlsym(lib, "seccomp_release");
    if (!init || !resolve || !rule_add || !seccomp_load_p || !seccomp_release_p)
        return PyErr_Format(PyExc_OSError, "libseccomp.so.2 lacks a function maestro calls");
    PyObject *seq = PySequence_Fast(rules, "rules must be a sequence");
    if (seq == NULL) return NULL;
    void *ctx = init(default_action);
    if (ctx == NULL) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_OSError, "seccomp_init failed");
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *name;
        PyObject *cmps;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sO", &name, &cmps)) goto fail;
        PyObject *cseq = PySequence_Fast(cmps, "comparisons must be a sequence");
        if (cseq == NULL) goto fail;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(cseq);
        if (m > MAX_CMPS) {
            Py_DECREF(cseq);
            PyErr_Format(PyExc_ValueError, "%s: at most %d comparisons", name, MAX_CMPS);
            goto fail;
        }
        struct arg_cmp array[MAX_CMPS];
        memset(array, 0, sizeof(array));
        for (Py_ssize_t j = 0; j < m; j++) {
            unsigned long long a, b;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(cseq, j), "IiKK", &array[j].arg,
                                  &array[j].op, &a, &b)) {
                Py_DECREF(cseq);
                goto fail;
            }
            array[j].datum_a = a;
            array[j].datum_b = b;
        }
        Py_DECREF(cseq);
        int number = resolve(name);
        if (number < 0) continue; /* not a system call here (alarm, select on arm64, ...) */
        int rc = rule_add(ctx, allow_action, number, (unsigned int)m, m ? array : NULL);
        if (rc != 0) {
            PyErr_Format(PyExc_OSError, "seccomp rule for %s: %s", name, strerror(-rc));
            goto fail;
        }
    }
    Py_DECREF(seq);
    filter_ctx = ctx;
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    seccomp_release_p(ctx);
    return NULL;
}

/* load_filter(): apply the prepared filter to this process for good. */
static PyObject *native_load_filter(PyObject *self, PyObject *noargs) {
    if (filter_ctx == NULL) return PyErr_Format(PyExc_RuntimeError, "no filter is prepared");
    int rc = seccomp_load_p(filter_ctx);
    seccomp_release_p(filter_ctx);
    filter_ctx = NULL;
    if (rc != 0) return seccomp_error("seccomp_load", rc);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"unshare", native_unshare, METH_VARARGS, "unshare(flags): leave namespaces."},
    {"mount", native_mount, METH_VARARGS,
     "mount(source, target, fstype, flags, data): mount(2); None for an absent string."},
    {"set_pdeathsig", native_set_pdeathsig, METH_VARARGS,
     "set_pdeathsig(signal): the signal this process gets when its parent dies."},
    {"prepare_filter", native_prepare_filter, METH_VARARGS,
     "prepare_filter(default_action, allow_action, rules): build a seccomp filter."},
    {"load_filter", native_load_filter, METH_NOARGS, "load_filter(): apply the filter for good."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The sandbox child's unshare, mount, prctl and seccomp calls, without ctypes.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
