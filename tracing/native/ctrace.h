/* Declarations shared by the files of tracing's C hook (the module tracing.native._ctrace).
 *
 * What the C hook is for is said in tracing/native/__init__.py. In short: the per-call work of the tracer in C.
 *   codetable.c    code object -> code id, by pointer (0: not selected), filled by the Python classify
 *   threadstate.c  a thread's depth, event count and place in the ring, shared with the Python recorder
 *   writer.c       one event -> a ring record and/or a stream line, exactly as tracing/recorder.py writes them
 *   frames.c       the line the nearest selected caller is at (ringformat.py: the executing line)
 *   hookbase.c     what the two hooks below hold in common
 *   evalhook.c     Python 3.10/3.11: a frame-evaluation function (PEP 523) that sees every Python frame start
 *   monitor.c      Python 3.12+: sys.monitoring callbacks
 *   module.c       the module, and calling back into Python from inside a hook
 */
#ifndef CTRACE_H
#define CTRACE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX < 0x030A0000
#error "tracing's C hook needs Python 3.10 or newer"
#endif
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ring format is little-endian and records are copied as they are in memory"
#endif

/* Event kinds, as tracing/records.py numbers them. */
enum { K_CALL = 1, K_RETURN = 2, K_UNWIND = 3, K_C_CALL = 4, K_C_RETURN = 5, K_OPEN = 6, K_GAP = 7 };
#define K_ENTERS(kind) ((kind) == K_CALL || (kind) == K_C_CALL || (kind) == K_OPEN)

/* Keeps the compiler from moving stores across it: a reader of the shared mapping (or a SIGKILL at any
 * instruction) must see a stack entry before the record that refers to it, and a record's first seq copy
 * before its body and its second copy after (ringformat.py, "Order of writes"). x86 and ARM keep the order of
 * one thread's stores as other processes see them through the page cache once they are issued in this order. */
#define CT_ORDER() __asm__ __volatile__("" ::: "memory")

/* ---- codetable.c ---------------------------------------------------------------------------------------- */
typedef struct {
    PyObject *code; /* strong reference: a freed code object's address could otherwise come back as another's */
    int32_t id;     /* code id; 0: not selected */
} CtEntry;

typedef struct {
    PyObject_HEAD
    CtEntry *entries;
    size_t mask;  /* capacity - 1; the capacity is a power of two */
    int shift;    /* 64 - log2(capacity), for Fibonacci hashing of the pointer */
    size_t used;
} CodeTable;

extern PyTypeObject CodeTable_Type;

/* The code id of `code`, or -1 when it was never classified. */
static inline int32_t codetable_get(const CodeTable *t, const void *code)
{
    size_t i = (size_t)((((uintptr_t)code >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
    for (;;) {
        const CtEntry *e = &t->entries[i];
        if (e->code == code)
            return e->id;
        if (e->code == NULL)
            return -1;
        i = (i + 1) & t->mask;
    }
}

int codetable_set(CodeTable *t, PyObject *code, int32_t id);

/* ---- threadstate.c -------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    int index;                /* the thread's slot in the ring (255: beyond the ring's slots) */
    long long depth;          /* selected frames recorded open */
    unsigned long long count; /* events of this thread so far */
    long long stack_off;      /* offset of its open-frame stack in the ring; -1 without one */
    long long limit;          /* depths below this have a stack entry in the ring */
    PyObject *cstack;         /* open C calls, (callable, code id) tuples: tracing/recorder.py's c hooks */
    /* evalhook.c: the outermost n_open entries are frames found open at the start, whose return the frame
     * hook cannot hear; their frames and code ids, to tell later whether they are still running. */
    Py_ssize_t n_open;
    Py_ssize_t cap_open;
    const void **open_frames;
    int32_t *open_ids;
} ThreadState;

extern PyTypeObject ThreadState_Type;
int threadstate_note_open(ThreadState *st, Py_ssize_t at, const void *frame, int32_t id);

/* ---- writer.c ------------------------------------------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    Py_buffer view;         /* the ring's mapping, held until release() */
    char *buf;              /* view.buf; NULL without a ring or once released */
    uint64_t capacity;      /* records in the ring */
    uint64_t records_off;   /* offset of record 0 */
    int64_t t0;             /* time.perf_counter_ns() at the start (CLOCK_MONOTONIC on Linux) */
    int fd;                 /* the stream file; -1 without one or once released */
    PyObject *names;        /* the recorder's stream names, a list of str indexed by code id */
    CodeTable *table;       /* the selection, for the line of the nearest selected caller */
    PyObject *new_thread;   /* the recorder's new_thread(): the calling thread's ThreadState, claimed once */
    PyObject *states;       /* list of the ThreadStates this writer handed out (keeps them alive) */
    uint64_t seq;           /* event number over all threads */
    uint64_t serial;        /* tells this writer from earlier ones in each thread's cached state */
} Writer;

extern PyTypeObject Writer_Type;
void writer_event(Writer *w, ThreadState *st, int kind, int32_t code_id, uint32_t line);
ThreadState *writer_thread_state(Writer *w, PyObject *on_error);

/* ---- frames.c ------------------------------------------------------------------------------------------- */
#define CT_HOPS 32 /* frames looked at for the selected caller, as tracing/recorder.py's CALLER_HOPS */

typedef struct {
    const void *frame; /* the selected frame found, as ct_frame_identity() names it */
    uint32_t line;     /* the line it is executing */
    int found;         /* 1: found; 0: no selected frame above at all; -1: not within CT_HOPS frames */
} CtCaller;

CtCaller ct_caller_from_object(const CodeTable *t, PyObject *frame);
CtCaller ct_caller_of_thread(const CodeTable *t, PyThreadState *ts, int skip_current);
const void *ct_frame_identity(PyObject *frame);

/* The exception being raised, taken out of the thread's error indicator and put back (a new reference; NULL
 * when none), so that a hook can call Python code while the program has an exception pending. */
#if PY_VERSION_HEX >= 0x030C0000
#define ct_take_exception() PyErr_GetRaisedException()
#define ct_put_exception(exc) PyErr_SetRaisedException(exc)
#else
static inline PyObject *ct_take_exception(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    Py_DECREF(type);
    Py_XDECREF(tb);
    return value;
}
static inline void ct_put_exception(PyObject *exc)
{
    if (exc != NULL)
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
}
#endif

/* ---- hookbase.c ------------------------------------------------------------------------------------------- */
/* What both hooks hold: the writer, the selection and the tracer's two callbacks. */
typedef struct {
    Writer *writer;
    CodeTable *table;   /* the selection; classify fills it */
    PyObject *classify; /* code -> code id (0: not selected); the tracer stores the answer in table */
    PyObject *on_error; /* a hook failed: the tracer stops with a warning */
} CtHookBase;

int ct_hook_base_parse(CtHookBase *base, PyObject *args, PyObject *kwds, const char *type_name, PyObject **extra);
int ct_hook_base_traverse(CtHookBase *base, visitproc visit, void *arg);
void ct_hook_base_clear(CtHookBase *base);

/* ---- module.c ------------------------------------------------------------------------------------------- */
extern _Thread_local int ct_in_hook; /* > 0 while this thread runs Python code called from a hook */
PyObject *ct_call(PyObject *fn, PyObject *arg, PyObject *on_error);
long ct_call_for_id(PyObject *fn, PyObject *arg, PyObject *on_error);

#if PY_VERSION_HEX < 0x030C0000
extern PyTypeObject EvalHook_Type;
#else
extern PyTypeObject MonitorHook_Type;
#endif

#endif /* CTRACE_H */
