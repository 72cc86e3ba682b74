/* Writer: turns one event into a ring record (and a stream line), as tracing/recorder.py's Python emit does.
 *
 * Same bytes, same order of writes (ringformat.py): on an entering event the thread's open-frame stack gets the
 * caller's line, the new code id, its line 0 and a 0 terminator, then the record; on a leaving event the stack
 * entry is zeroed, then the record. The record's first seq copy is written before its body and the second copy
 * after it, so a process killed in between leaves copies that disagree, which readers refuse as a torn write.
 * With a stream file, the line is formatted as streamfile.py's and written with one write(2).
 *
 * The hooks call writer_event() directly; Python code (open frames at the start, C calls, tests) calls
 * Writer.emit(kind, code_id, state=None, caller=None), the recorder's emit signature.
 */
#include "ctrace.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORD_SIZE 32
#define ENTRY_SIZE 8 /* a stack entry: u32 code id, u32 line */
#define MAX_INDENT 40

static const char *const WORDS[] = {"?     ", "call  ", "ret   ", "exc   ", "ccall ", "cret  ", "open  ", "gap   "};

/* The calling thread's state under the writer that was asked last, so that a lookup costs no dict. */
static _Thread_local uint64_t cached_serial;
static _Thread_local ThreadState *cached_state;

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void put_u32(char *at, uint32_t v) { memcpy(at, &v, 4); }

static void push_entry(Writer *w, ThreadState *st, long long d, int32_t code_id, uint32_t line)
{
    if (st->stack_off < 0 || (uint64_t)(st->stack_off + ENTRY_SIZE * (d + 1) + 4) > (uint64_t)w->view.len)
        return;
    char *stack = w->buf + st->stack_off;
    if (d) {
        char *at = stack + ENTRY_SIZE * d - 4; /* the caller's line, ending its entry, then the new entry */
        put_u32(at, line);
        put_u32(at + 4, (uint32_t)code_id);
        put_u32(at + 8, 0);
        put_u32(at + 12, 0);
    } else {
        put_u32(stack, (uint32_t)code_id);
        put_u32(stack + 4, 0);
        put_u32(stack + 8, 0);
    }
}

static void write_record(Writer *w, uint64_t n, int64_t t, int32_t code_id, long long d, int kind, int slot,
                         uint64_t count)
{
    char *r = w->buf + w->records_off + (n % w->capacity) * RECORD_SIZE;
    uint16_t depth = d > 0xFFFF ? 0xFFFF : (uint16_t)d;
    uint8_t kind8 = (uint8_t)kind, slot8 = (uint8_t)slot;
    uint32_t code32 = (uint32_t)code_id, count32 = (uint32_t)count, low = (uint32_t)n;
    memcpy(r, &n, 8);
    CT_ORDER();
    memcpy(r + 8, &t, 8);
    memcpy(r + 16, &code32, 4);
    memcpy(r + 20, &depth, 2);
    memcpy(r + 22, &kind8, 1);
    memcpy(r + 23, &slot8, 1);
    memcpy(r + 24, &count32, 4);
    CT_ORDER();
    memcpy(r + 28, &low, 4);
}

/* "seconds slot depth kind <indent>name\n", as recorder.py formats it; one write(2) on the O_APPEND file. */
static void write_line(Writer *w, ThreadState *st, int kind, int32_t code_id, long long d, int64_t t)
{
    const char *name = "?";
    Py_ssize_t name_len = 1;
    if (code_id >= 0 && code_id < PyList_GET_SIZE(w->names)) {
        PyObject *saved = PyErr_Occurred() ? ct_take_exception() : NULL;
        const char *utf8 = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(w->names, code_id), &name_len);
        if (utf8 != NULL)
            name = utf8;
        else {
            PyErr_Clear();
            name_len = 1;
        }
        if (saved != NULL)
            ct_put_exception(saved);
    }
    char head[96];
    int indent = d < MAX_INDENT ? (int)d : MAX_INDENT;
    int n = snprintf(head, sizeof head, "%.6f %d %lld %s %*s", (double)t / 1e9, st->index, d,
                     WORDS[kind >= 0 && kind <= K_GAP ? kind : 0], indent, "");
    if (n < 0 || n >= (int)sizeof head)
        return;
    size_t total = (size_t)n + (size_t)name_len + 1;
    char small[512];
    char *line = total <= sizeof small ? small : PyMem_RawMalloc(total);
    if (line == NULL)
        return;
    memcpy(line, head, n);
    memcpy(line + n, name, name_len);
    line[total - 1] = '\n';
    ssize_t ignored = write(w->fd, line, total); /* a full disk must not stop the program */
    (void)ignored;
    if (line != small)
        PyMem_RawFree(line);
}

void writer_event(Writer *w, ThreadState *st, int kind, int32_t code_id, uint32_t line)
{
    long long d = st->depth;
    if (K_ENTERS(kind)) {
        st->depth = d + 1;
        if (d < st->limit && w->buf != NULL)
            push_entry(w, st, d, code_id, line);
    }
    else {
        if (d == 0)
            return; /* leaving a frame that was open before tracing saw this thread */
        d -= 1;
        st->depth = d;
        if (st->n_open > d)
            st->n_open = d;
        if (d < st->limit && w->buf != NULL && st->stack_off >= 0 &&
            (uint64_t)(st->stack_off + ENTRY_SIZE * d + 4) <= (uint64_t)w->view.len)
            put_u32(w->buf + st->stack_off + ENTRY_SIZE * d, 0);
    }
    uint64_t n = w->seq++;
    uint64_t count = st->count++;
    int64_t t = now_ns() - w->t0;
    if (w->buf != NULL) {
        CT_ORDER();
        write_record(w, n, t, code_id, d, kind, st->index, count);
    }
    if (w->fd >= 0)
        write_line(w, st, kind, code_id, d, t);
}

ThreadState *writer_thread_state(Writer *w, PyObject *on_error)
{
    if (cached_serial == w->serial)
        return cached_state;
    PyObject *st = ct_call(w->new_thread, NULL, on_error);
    if (st == NULL)
        return NULL;
    if (!PyObject_TypeCheck(st, &ThreadState_Type) || PyList_Append(w->states, st) < 0) {
        PyErr_Clear();
        Py_DECREF(st);
        return NULL;
    }
    Py_DECREF(st); /* w->states holds it */
    cached_serial = w->serial;
    cached_state = (ThreadState *)st;
    return cached_state;
}
