/* ThreadState: one traced thread's place in the ring, its depth and its event count.
 *
 * The same object serves the C writer (which reads and updates the fields directly) and the Python recorder
 * (tracing/recorder.py: new_thread creates it, mark_gap / note_line / reset_depths and the C-call hooks use its
 * attributes by name), so the two never disagree about a thread's depth. It mirrors recorder.ThreadState, plus
 * the frames found open at the start that the frame hook cannot hear return (see evalhook.c).
 */
#include "ctrace.h"

#include <stddef.h>

#if PY_VERSION_HEX < 0x030C0000
#include "structmember.h"
#define Py_T_INT T_INT
#define Py_T_LONGLONG T_LONGLONG
#define Py_T_ULONGLONG T_ULONGLONG
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

static PyObject *state_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"index", "stack_off", "limit", NULL};
    int index;
    long long stack_off, limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iLL:ThreadState", names, &index, &stack_off, &limit))
        return NULL;
    ThreadState *st = (ThreadState *)type->tp_alloc(type, 0);
    if (st == NULL)
        return NULL;
    st->cstack = PyList_New(0);
    if (st->cstack == NULL) {
        Py_DECREF(st);
        return NULL;
    }
    st->index = index;
    st->stack_off = stack_off;
    st->limit = limit;
    return (PyObject *)st;
}

static int state_traverse(ThreadState *st, visitproc visit, void *arg)
{
    Py_VISIT(st->cstack);
    return 0;
}

static int state_clear(ThreadState *st)
{
    Py_CLEAR(st->cstack);
    return 0;
}

static void state_dealloc(ThreadState *st)
{
    PyObject_GC_UnTrack(st);
    state_clear(st);
    PyMem_Free(st->open_frames);
    PyMem_Free(st->open_ids);
    Py_TYPE(st)->tp_free((PyObject *)st);
}

/* Remember that stack entry `at` is the frame `frame` (code id `id`), found open at the start. */
int threadstate_note_open(ThreadState *st, Py_ssize_t at, const void *frame, int32_t id)
{
    if (at < 0)
        return 0;
    if (at >= st->cap_open) {
        Py_ssize_t capacity = st->cap_open ? st->cap_open : 16;
        while (capacity <= at)
            capacity *= 2;
        const void **frames = PyMem_Realloc(st->open_frames, capacity * sizeof(*frames));
        if (frames == NULL)
            return -1;
        st->open_frames = frames;
        int32_t *ids = PyMem_Realloc(st->open_ids, capacity * sizeof(*ids));
        if (ids == NULL)
            return -1;
        st->open_ids = ids;
        st->cap_open = capacity;
    }
    st->open_frames[at] = frame;
    st->open_ids[at] = id;
    return 0;
}

static PyMemberDef state_members[] = {
    {"index", Py_T_INT, offsetof(ThreadState, index), 0, "thread slot in the ring"},
    {"depth", Py_T_LONGLONG, offsetof(ThreadState, depth), 0, "selected frames recorded open"},
    {"count", Py_T_ULONGLONG, offsetof(ThreadState, count), 0, "events of this thread so far"},
    {"stack_off", Py_T_LONGLONG, offsetof(ThreadState, stack_off), 0, "offset of the open-frame stack"},
    {"limit", Py_T_LONGLONG, offsetof(ThreadState, limit), 0, "depths below this have a stack entry"},
    {"cstack", Py_T_OBJECT_EX, offsetof(ThreadState, cstack), Py_READONLY, "open C calls: (callable, code id)"},
    {NULL},
};

PyTypeObject ThreadState_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracing.native._ctrace.ThreadState",
    .tp_doc = "ThreadState(index, stack_off, limit): a traced thread, shared by the C writer and the recorder",
    .tp_basicsize = sizeof(ThreadState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = state_new,
    .tp_traverse = (traverseproc)state_traverse,
    .tp_clear = (inquiry)state_clear,
    .tp_dealloc = (destructor)state_dealloc,
    .tp_members = state_members,
};
