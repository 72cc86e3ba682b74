/* The Writer type as Python sees it (the event path itself is writer.c).
 *
 *   Writer(buf, capacity, records_off, t0_ns, stream_fd, names, table, new_thread)
 *
 * buf is the ring's mapping (any writable buffer; None without a ring), capacity and records_off come from the
 * ring's header, t0_ns is the recorder's time.perf_counter_ns() at the start, stream_fd the stream file's
 * descriptor (-1 without one), names the recorder's stream names, table the selection (a CodeTable) and
 * new_thread the recorder's new_thread. tracing/recorder.py creates it when the C hook is in use; release()
 * must come before the ring's mapping and the stream file are closed.
 */
#include "ctrace.h"

static uint64_t serials = 0;

static PyObject *writer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"buf", "capacity", "records_off", "t0_ns", "stream_fd", "names", "table", "new_thread",
                            NULL};
    PyObject *buf, *list, *table, *new_thread;
    unsigned long long capacity, records_off;
    long long t0;
    int fd;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OKKLiO!O!O:Writer", names, &buf, &capacity, &records_off, &t0,
                                     &fd, &PyList_Type, &list, &CodeTable_Type, &table, &new_thread))
        return NULL;
    Writer *w = (Writer *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->fd = -1;
    if (buf != Py_None) {
        if (PyObject_GetBuffer(buf, &w->view, PyBUF_WRITABLE) < 0) {
            Py_DECREF(w);
            return NULL;
        }
        w->buf = w->view.buf;
        if (capacity == 0 || records_off + capacity * 32 > (unsigned long long)w->view.len) {
            PyErr_SetString(PyExc_ValueError, "the ring's records do not fit in the buffer");
            Py_DECREF(w);
            return NULL;
        }
    }
    w->capacity = capacity ? capacity : 1;
    w->records_off = records_off;
    w->t0 = t0;
    w->fd = fd;
    w->names = Py_NewRef(list);
    w->table = (CodeTable *)Py_NewRef(table);
    w->new_thread = Py_NewRef(new_thread);
    w->states = PyList_New(0);
    if (w->states == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    w->serial = ++serials;
    return (PyObject *)w;
}

static void writer_release_all(Writer *w)
{
    if (w->buf != NULL) {
        w->buf = NULL;
        PyBuffer_Release(&w->view);
    }
    w->fd = -1;
}

static int writer_traverse(Writer *w, visitproc visit, void *arg)
{
    Py_VISIT(w->names);
    Py_VISIT(w->table);
    Py_VISIT(w->new_thread);
    Py_VISIT(w->states);
    return 0;
}

static int writer_clear(Writer *w)
{
    Py_CLEAR(w->names);
    Py_CLEAR(w->table);
    Py_CLEAR(w->new_thread);
    Py_CLEAR(w->states);
    return 0;
}

static void writer_dealloc(Writer *w)
{
    PyObject_GC_UnTrack(w);
    writer_release_all(w);
    writer_clear(w);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* emit(kind, code_id, state=None, caller=None): the recorder's emit. caller, for an entering event, is the frame
 * it was entered from; the line of the nearest selected frame at or above it goes into the parent's entry. */
static PyObject *writer_emit(Writer *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "emit(kind, code_id, state=None, caller=None)");
        return NULL;
    }
    long kind = PyLong_AsLong(args[0]);
    long code_id = PyLong_AsLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    if (kind < K_CALL || kind > K_GAP || code_id < 0 || code_id > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "bad event: kind %ld, code id %ld", kind, code_id);
        return NULL;
    }
    ThreadState *st;
    if (nargs >= 3 && args[2] != Py_None) {
        if (!PyObject_TypeCheck(args[2], &ThreadState_Type)) {
            PyErr_SetString(PyExc_TypeError, "state must be a ThreadState of the C hook");
            return NULL;
        }
        st = (ThreadState *)args[2];
    }
    else if ((st = writer_thread_state(w, NULL)) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "recorder.new_thread did not return a ThreadState");
        return NULL;
    }
    uint32_t line = 0;
    if (K_ENTERS(kind) && nargs == 4 && args[3] != Py_None && st->depth > 0 && st->depth < st->limit) {
        CtCaller caller = ct_caller_from_object(w->table, args[3]);
        if (PyErr_Occurred())
            return NULL;
        line = caller.found > 0 ? caller.line : 0;
    }
    writer_event(w, st, (int)kind, (int32_t)code_id, line);
    Py_RETURN_NONE;
}

static PyObject *writer_next_seq(Writer *w, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(w->seq++);
}

static PyObject *writer_release(Writer *w, PyObject *unused)
{
    writer_release_all(w);
    Py_RETURN_NONE;
}

static PyMethodDef writer_methods[] = {
    {"emit", (PyCFunction)(void (*)(void))writer_emit, METH_FASTCALL,
     "emit(kind, code_id, state=None, caller=None): record one event for the calling thread (or for state)"},
    {"next_seq", (PyCFunction)writer_next_seq, METH_NOARGS, "the next event number (for events written in Python)"},
    {"release", (PyCFunction)writer_release, METH_NOARGS,
     "let go of the ring's mapping and the stream file; later events write nothing"},
    {NULL},
};

PyTypeObject Writer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracing.native._ctrace.Writer",
    .tp_doc = "Writer(buf, capacity, records_off, t0_ns, stream_fd, names, table, new_thread): events -> ring/stream",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = writer_new,
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_methods = writer_methods,
};
