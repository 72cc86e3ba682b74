/* The nearest selected frame above a call, and the line it is executing (ringformat.py: the executing line).
 *
 * When a selected frame is entered, the line of its nearest selected caller goes into the caller's stack
 * entry: the caller itself when it is selected, else the first selected frame further up, looking at
 * CT_HOPS frames at most (as tracing/recorder.py's _caller_line does).
 *
 * Two walks: from a frame object, through the public API (used for events that Python code hands in), and from
 * the thread's current frame (used inside the hooks, where no frame object may exist yet). The second reads
 * CPython's own frame structures: PyFrameObject's f_back on 3.10, the interpreter frames of 3.11+
 * (internal/pycore_frame.h; this module is compiled against the headers of the very interpreter that loads it,
 * see tracing/native/build.py). A frame is identified by the same pointer in both walks (ct_frame_identity), so
 * that evalhook.c can tell whether a frame found open at the start is still running.
 */
#include "ctrace.h"

#if PY_VERSION_HEX >= 0x030B0000
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE
#else
#include "frameobject.h"
#endif

static int is_selected(const CodeTable *t, const void *code) { return codetable_get(t, code) > 0; }

CtCaller ct_caller_from_object(const CodeTable *t, PyObject *frame)
{
    CtCaller found = {NULL, 0, 0};
    if (frame == NULL || !PyFrame_Check(frame))
        return found;
    PyFrameObject *f = (PyFrameObject *)Py_NewRef(frame);
    for (int hops = 0; f != NULL; hops++) {
        if (hops == CT_HOPS) {
            found.found = -1;
            break;
        }
        PyCodeObject *code = PyFrame_GetCode(f);
        int selected = is_selected(t, code);
        Py_DECREF(code);
        if (selected) {
            int line = PyFrame_GetLineNumber(f);
            found.frame = ct_frame_identity((PyObject *)f);
            found.line = line > 0 ? (uint32_t)line : 0;
            found.found = 1;
            break;
        }
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    return found;
}

#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame Frame;

static inline Frame *current_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#else
    return ts->cframe->current_frame;
#endif
}

static inline PyObject *frame_code(Frame *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    return f->f_executable;
#else
    return (PyObject *)f->f_code;
#endif
}

/* Frames being set up, and the C-stack shims of 3.12+, are no caller of anything. */
static inline Frame *complete(Frame *f)
{
    while (f != NULL && _PyFrame_IsIncomplete(f))
        f = f->previous;
    return f;
}

CtCaller ct_caller_of_thread(const CodeTable *t, PyThreadState *ts, int skip_current)
{
    CtCaller found = {NULL, 0, 0};
    Frame *f = complete(current_frame(ts));
    if (skip_current && f != NULL)
        f = complete(f->previous);
    for (int hops = 0; f != NULL; hops++, f = complete(f->previous)) {
        if (hops == CT_HOPS) {
            found.found = -1;
            break;
        }
        PyObject *code = frame_code(f);
        if (PyCode_Check(code) && is_selected(t, code)) {
            int line = PyCode_Addr2Line((PyCodeObject *)code, _PyInterpreterFrame_LASTI(f) * sizeof(_Py_CODEUNIT));
            found.frame = f;
            found.line = line > 0 ? (uint32_t)line : 0;
            found.found = 1;
            break;
        }
    }
    return found;
}

const void *ct_frame_identity(PyObject *frame)
{
    return ((PyFrameObject *)frame)->f_frame; /* the interpreter frame, while the frame runs */
}

#else /* 3.10: frame objects all the way */

CtCaller ct_caller_of_thread(const CodeTable *t, PyThreadState *ts, int skip_current)
{
    CtCaller found = {NULL, 0, 0};
    PyFrameObject *f = ts->frame;
    if (skip_current && f != NULL)
        f = f->f_back;
    for (int hops = 0; f != NULL; hops++, f = f->f_back) {
        if (hops == CT_HOPS) {
            found.found = -1;
            break;
        }
        if (is_selected(t, f->f_code)) {
            int line = PyFrame_GetLineNumber(f);
            found.frame = f;
            found.line = line > 0 ? (uint32_t)line : 0;
            found.found = 1;
            break;
        }
    }
    return found;
}

const void *ct_frame_identity(PyObject *frame) { return frame; }

#endif
