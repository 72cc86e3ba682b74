/* Hooks that do nothing, to measure what merely having each kind of hook costs (bench/bench_tracing_hooks.py).
 *
 * profile()  PyEval_SetProfile with a C function that returns at once: CPython calls it at every call and return
 *            of every frame and every C call, and runs every frame on its tracing path;
 * trace()    PyEval_SetTrace with the same function: calls, returns and every line, also on the tracing path;
 * evalframe() a frame-evaluation function (PEP 523, 3.10/3.11 only here) that hands each frame to CPython's own.
 * All count the calls they got, so the run can say how many events each kind of hook sees.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static unsigned long long calls;

static int nothing(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    calls++;
    return 0;
}

static PyObject *profile(PyObject *module, PyObject *unused)
{
    PyEval_SetProfile(nothing, NULL);
    Py_RETURN_NONE;
}

static PyObject *trace(PyObject *module, PyObject *unused)
{
    PyEval_SetTrace(nothing, NULL);
    Py_RETURN_NONE;
}

#if PY_VERSION_HEX < 0x030C0000
#if PY_VERSION_HEX < 0x030B0000
#define FRAME PyFrameObject
#else
#define FRAME struct _PyInterpreterFrame
#endif
static PyObject *evaluate_frame(PyThreadState *ts, FRAME *frame, int throwflag)
{
    calls++;
    return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

static PyObject *evalframe(PyObject *module, PyObject *unused)
{
    _PyInterpreterState_SetEvalFrameFunc(PyThreadState_Get()->interp, evaluate_frame);
    Py_RETURN_NONE;
}
#endif

static PyObject *count(PyObject *module, PyObject *unused) { return PyLong_FromUnsignedLongLong(calls); }

static PyMethodDef methods[] = {
    {"profile", profile, METH_NOARGS, "install the do-nothing profile function"},
    {"trace", trace, METH_NOARGS, "install the do-nothing trace function"},
#if PY_VERSION_HEX < 0x030C0000
    {"evalframe", evalframe, METH_NOARGS, "install the pass-through frame-evaluation function"},
#endif
    {"count", count, METH_NOARGS, "calls the hook got"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "noophooks", NULL, -1, methods};

PyMODINIT_FUNC PyInit_noophooks(void) { return PyModule_Create(&module); }
