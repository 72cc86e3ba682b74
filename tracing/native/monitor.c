/* MonitorHook (Python 3.12+): sys.monitoring callbacks written in C.
 *
 * tracing/backends/cmonitoring.py registers these bound methods as the callbacks of its tool id, exactly where
 * backends/monitoring.py registers Python functions: enter (PY_START, PY_RESUME), throw (PY_THROW), leave
 * (PY_RETURN, PY_YIELD) and unwind (PY_UNWIND). sys.monitoring already makes unselected code free (a callback
 * returning DISABLE switches that event off for that code for good); what C saves is the cost of each selected
 * event: a Python call, a clock read and a pack_into become a table lookup, a clock read and a few stores.
 *
 * A callback must never raise into the program: a failure goes to on_error (the tracer stops with a warning),
 * and the callback returns None. sys.monitoring reports no events while a callback runs, so the Python classify
 * called from here records nothing itself.
 */
#include "ctrace.h"

#if PY_VERSION_HEX >= 0x030C0000

typedef struct {
    PyObject_HEAD
    CtHookBase base;
    PyObject *disable; /* sys.monitoring.DISABLE */
} MonitorHook;

/* The code id of args[0] (classified on first sight), or -1 to record nothing this time. */
static int32_t code_id_of(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || !PyCode_Check(args[0]))
        return -1;
    int32_t id = codetable_get(h->base.table, args[0]);
    if (id < 0)
        id = (int32_t)ct_call_for_id(h->base.classify, args[0], h->base.on_error);
    return id;
}

static void record(MonitorHook *h, int kind, int32_t id)
{
    ThreadState *st = writer_thread_state(h->base.writer, h->base.on_error);
    if (st == NULL)
        return;
    uint32_t line = 0;
    if (kind == K_CALL && st->depth > 0 && st->depth < st->limit) {
        CtCaller caller = ct_caller_of_thread(h->base.table, PyThreadState_Get(), 1); /* above the frame that starts */
        line = caller.found > 0 ? caller.line : 0;
    }
    writer_event(h->base.writer, st, kind, id, line);
}

/* An entering or leaving event: DISABLE for unselected code where the event can be disabled, else the record. */
static PyObject *on_event(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs, int kind, int disableable)
{
    int32_t id = code_id_of(h, args, nargs);
    if (id == 0 && disableable)
        return Py_NewRef(h->disable);
    if (id > 0)
        record(h, kind, id);
    Py_RETURN_NONE;
}

/* PY_START, PY_RESUME: (code, offset). */
static PyObject *hook_enter(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs)
{
    return on_event(h, args, nargs, K_CALL, 1);
}

/* PY_THROW: (code, offset, exception); cannot be disabled. */
static PyObject *hook_throw(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs)
{
    return on_event(h, args, nargs, K_CALL, 0);
}

/* PY_RETURN, PY_YIELD: (code, offset, value). */
static PyObject *hook_leave(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs)
{
    return on_event(h, args, nargs, K_RETURN, 1);
}

/* PY_UNWIND: (code, offset, exception); cannot be disabled, and unknown code is not worth classifying here. */
static PyObject *hook_unwind(MonitorHook *h, PyObject *const *args, Py_ssize_t nargs)
{
    int32_t id = nargs >= 2 && PyCode_Check(args[0]) ? codetable_get(h->base.table, args[0]) : -1;
    if (id > 0)
        record(h, K_UNWIND, id);
    Py_RETURN_NONE;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    MonitorHook *h = (MonitorHook *)type->tp_alloc(type, 0);
    if (h != NULL && ct_hook_base_parse(&h->base, args, kwds, "MonitorHook", &h->disable) < 0)
        Py_CLEAR(h);
    return (PyObject *)h;
}

static int hook_traverse(MonitorHook *h, visitproc visit, void *arg)
{
    Py_VISIT(h->disable);
    return ct_hook_base_traverse(&h->base, visit, arg);
}

static int hook_clear(MonitorHook *h)
{
    ct_hook_base_clear(&h->base);
    Py_CLEAR(h->disable);
    return 0;
}

static void hook_dealloc(MonitorHook *h)
{
    PyObject_GC_UnTrack(h);
    hook_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

#define CALLBACK(name, doc) {#name, (PyCFunction)(void (*)(void))hook_##name, METH_FASTCALL, doc}
static PyMethodDef hook_methods[] = {
    CALLBACK(enter, "PY_START / PY_RESUME callback"),
    CALLBACK(throw, "PY_THROW callback"),
    CALLBACK(leave, "PY_RETURN / PY_YIELD callback"),
    CALLBACK(unwind, "PY_UNWIND callback"),
    {NULL},
};

PyTypeObject MonitorHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracing.native._ctrace.MonitorHook",
    .tp_doc = "MonitorHook(writer, table, classify, on_error, disable): sys.monitoring callbacks in C (3.12+)",
    .tp_basicsize = sizeof(MonitorHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = hook_new,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_methods = hook_methods,
};

#endif /* 3.12+ */
