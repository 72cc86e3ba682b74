/* The module tracing.native._ctrace, and how a hook calls back into Python.
 *
 * Constants for the loader (tracing/native/__init__.py): DIGEST, the digest of the sources it was compiled from
 * (given by the build as -DCTRACE_DIGEST; empty when unknown), PY_VERSION_HEX, the Python it was compiled for
 * (the frame hook reads that interpreter's own structures, so a build is only good for it), and HOOK, which
 * hook this build has: "eval" (frame evaluation, Python 3.10/3.11) or "monitoring" (sys.monitoring, 3.12+).
 */
#include "ctrace.h"

#ifndef CTRACE_DIGEST
#define CTRACE_DIGEST ""
#endif

_Thread_local int ct_in_hook;

/* fn(arg) (fn() when arg is NULL) from inside a hook. Frames the call runs are not recorded (ct_in_hook).
 * With on_error, the call must leave the program's state alone: an exception the program had pending is put
 * back afterwards, and a failure of the call is handed to on_error (the tracer stops with a warning), except a
 * RecursionError, which only means "too deep to decide here": the caller skips this one event. Without
 * on_error, a failure stays set for the caller to raise. Returns a new reference or NULL. */
PyObject *ct_call(PyObject *fn, PyObject *arg, PyObject *on_error)
{
    PyObject *pending = on_error != NULL ? ct_take_exception() : NULL;
    ct_in_hook++;
    PyObject *result = arg != NULL ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
    if (result == NULL && on_error != NULL) {
        PyObject *error = ct_take_exception();
        if (error != NULL && !PyErr_GivenExceptionMatches(error, PyExc_RecursionError)) {
            PyObject *ignored = PyObject_CallOneArg(on_error, error);
            if (ignored == NULL)
                PyErr_Clear();
            Py_XDECREF(ignored);
        }
        Py_XDECREF(error);
    }
    ct_in_hook--;
    if (on_error != NULL)
        ct_put_exception(pending);
    return result;
}

/* ct_call for a code id: the answer as a non-negative number, or -1 when there is none. */
long ct_call_for_id(PyObject *fn, PyObject *arg, PyObject *on_error)
{
    PyObject *result = ct_call(fn, arg, on_error);
    if (result == NULL)
        return -1;
    PyObject *pending = ct_take_exception();
    long id = PyLong_Check(result) ? PyLong_AsLong(result) : -1;
    if (id < 0 || id > INT32_MAX) {
        PyErr_Clear();
        id = -1;
    }
    ct_put_exception(pending);
    Py_DECREF(result);
    return id;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_ctrace",
    .m_doc = "hangdoctor tracing's C hook: the selection cache, the ring writer and the per-call hook",
    .m_size = -1,
};

static int add_type(PyObject *m, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) < 0)
        return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__ctrace(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (add_type(m, &CodeTable_Type, "CodeTable") < 0 || add_type(m, &ThreadState_Type, "ThreadState") < 0 ||
        add_type(m, &Writer_Type, "Writer") < 0 ||
#if PY_VERSION_HEX < 0x030C0000
        add_type(m, &EvalHook_Type, "EvalHook") < 0 || PyModule_AddStringConstant(m, "HOOK", "eval") < 0 ||
#else
        add_type(m, &MonitorHook_Type, "MonitorHook") < 0 || PyModule_AddStringConstant(m, "HOOK", "monitoring") < 0 ||
#endif
        PyModule_AddStringConstant(m, "DIGEST", CTRACE_DIGEST) < 0 ||
        PyModule_AddIntConstant(m, "PY_VERSION_HEX", PY_VERSION_HEX) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
