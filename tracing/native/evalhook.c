/* EvalHook (Python 3.10 and 3.11): a frame-evaluation function (PEP 523) that records the selected frames.
 *
 * Why this hook and not a C trace or profile function (docs/tracing.md, "The C hook"): setting either puts the
 * interpreter on its slow path for every frame, selected or not: each instruction goes through the tracing
 * check, 3.11 stops using its specialised instructions, and every call and return reaches the hook. A C profile
 * function that did nothing at all still cost 1.7x (3.10) and 3.7x (3.11) on pure-Python calls here. An
 * evaluation function is called once per frame start (a call, or a generator resuming) and leaves the
 * interpreter's fast path alone; on 3.11 Python-to-Python calls go through the C stack again, as on 3.10.
 *
 * Per frame: one pointer lookup in the CodeTable; unselected code goes straight on to the evaluation function
 * that was installed before (CPython's own, or whatever another tool put there). A selected frame gets a CALL
 * before it runs and a RETURN (UNWIND when an exception leaves it) when its evaluation returns, in the same C
 * call, so calls and returns always pair. The function is interpreter-wide: every thread is covered, also the
 * threads that were running before the start.
 *
 * Frames that were running when tracing started are recorded as OPEN by the tracer and handed to adopt(). Those
 * that started while the hook waited for --start-at are evaluated through it too, and their return is heard.
 * What it cannot hear is the return of a frame that was running before the hook was installed at all (entered
 * through another evaluation; with `tracing run` and HANGDOCTOR_TRACE the hook is installed before the program
 * starts, so this is the API's tracing.start() in the middle of a program, or a restart after stop()). When a
 * call is made while a thread's recorded stack holds only frames found open, the nearest selected frame above the
 * call is the innermost of them still running; the ones recorded inside it have returned, and their RETURNs are
 * recorded then. Such a frame that returns with no selected call after it stays open in the ring.
 *
 * Modes: WAITING (--start-at: every new code object is shown to the matcher once; on a match, on_match(the
 * calling frame) records the open frames and begins tracing, and the matching frame is recorded as a CALL),
 * TRACING and OFF. One hook is active per process at a time, as one tracer is.
 */
#include "ctrace.h"

#if PY_VERSION_HEX < 0x030C0000

#if PY_VERSION_HEX >= 0x030B0000
#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE
typedef struct _PyInterpreterFrame EvalFrame;
#else
#include "frameobject.h"
typedef PyFrameObject EvalFrame;
#endif

enum { MODE_OFF, MODE_WAITING, MODE_TRACING };

/* 3.11 evaluates a generator function's new frame once just to create the generator (RETURN_GENERATOR): that is
 * no call of it; its later resumptions run on the generator's own frame. 3.10 creates generators unevaluated. */
#if PY_VERSION_HEX >= 0x030B0000
#define GENERATOR_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)
#define CREATES_GENERATOR(f) (((f)->f_code->co_flags & GENERATOR_FLAGS) && (f)->owner != FRAME_OWNED_BY_GENERATOR)
#else
#define CREATES_GENERATOR(f) 0
#endif

typedef struct {
    PyObject_HEAD
    CtHookBase base;
    int mode;
    PyObject *matcher;   /* WAITING: code -> is it the --start-at function? */
    PyObject *on_match;  /* WAITING: frame -> None, begins tracing */
    CodeTable *waited;   /* the matcher's answers, 1 or 0 */
} EvalHook;

static EvalHook *active;               /* the hook in charge; NULL: every frame passes straight on */
static _PyFrameEvalFunction next_eval; /* the evaluation function that was installed before ours */

static inline PyObject *evaluate(PyThreadState *ts, EvalFrame *frame, int throwflag)
{
    return next_eval(ts, frame, throwflag);
}

/* A thread's recorded stack holds only frames found open at the start, and a call is being made under them:
 * record the returns of those that are no longer running (see the top of this file). */
static void settle_open_frames(Writer *w, ThreadState *st, const CtCaller *caller)
{
    if (caller->found < 0)
        return; /* the nearest selected frame is too far up to tell */
    Py_ssize_t keep = 0;
    if (caller->found > 0) {
        keep = -1;
        for (Py_ssize_t j = st->depth - 1; j >= 0 && keep < 0; j--)
            if (j < st->cap_open && st->open_frames[j] == caller->frame)
                keep = j + 1;
        if (keep < 0)
            return; /* a selected frame that is none of them: nothing to conclude */
    }
    while (st->depth > keep) {
        Py_ssize_t j = (Py_ssize_t)st->depth - 1;
        writer_event(w, st, K_RETURN, j < st->cap_open ? st->open_ids[j] : 0, 0);
    }
}

/* TRACING, a selected frame: CALL, the frame's evaluation, then RETURN or UNWIND. The caller holds h. */
static PyObject *record(EvalHook *h, PyThreadState *ts, EvalFrame *frame, int throwflag, int32_t id)
{
    Writer *w = h->base.writer;
    ThreadState *st = writer_thread_state(w, h->base.on_error);
    if (st == NULL || active != h)
        return evaluate(ts, frame, throwflag);
    CtCaller caller = {NULL, 0, 0};
    int settle = st->n_open > 0 && st->depth <= st->n_open;
    if (settle || (st->depth > 0 && st->depth < st->limit))
        caller = ct_caller_of_thread(h->base.table, ts, 0); /* the new frame is not running yet: from its caller */
    if (settle)
        settle_open_frames(w, st, &caller);
    writer_event(w, st, K_CALL, id, caller.found > 0 ? caller.line : 0);
    Py_INCREF(st);
    PyObject *result = evaluate(ts, frame, throwflag);
    if (active == h && h->mode == MODE_TRACING)
        writer_event(w, st, result != NULL ? K_RETURN : K_UNWIND, id, 0);
    Py_DECREF(st);
    return result;
}

/* WAITING: is code the --start-at function? Asked once per code object. */
static int matches(EvalHook *h, PyObject *code)
{
    int32_t known = codetable_get(h->waited, code);
    if (known >= 0)
        return known;
    PyObject *answer = ct_call(h->matcher, code, h->base.on_error);
    if (answer == NULL)
        return 0; /* a RecursionError asks again next time; any other error stopped the tracer */
    PyObject *pending = ct_take_exception();
    int hit = PyObject_IsTrue(answer) > 0;
    PyErr_Clear();
    ct_put_exception(pending);
    Py_DECREF(answer);
    codetable_set(h->waited, code, hit); /* out of memory: asked again next time */
    return hit;
}

/* WAITING, a selected frame: it starts before tracing does. If tracing begins while it runs, the tracer records
 * it as OPEN (adopt); its return is then heard here, as for the frames that start while tracing. */
static PyObject *run_before_start(EvalHook *h, PyThreadState *ts, EvalFrame *frame, int throwflag, int32_t id)
{
    PyObject *result = evaluate(ts, frame, throwflag);
    if (active == h && h->mode == MODE_TRACING && !ct_in_hook) {
        ThreadState *st = writer_thread_state(h->base.writer, h->base.on_error);
        if (st != NULL && st->depth > 0 && st->depth == st->n_open && st->open_frames[st->depth - 1] == frame)
            writer_event(h->base.writer, st, result != NULL ? K_RETURN : K_UNWIND, id, 0);
    }
    return result;
}

/* Everything but the common case. h is held throughout: the tracer may end the hook and let go of it from any
 * Python code called here (a failing classify stops tracing). */
static PyObject *eval_with(EvalHook *h, PyThreadState *ts, EvalFrame *frame, int throwflag, int32_t id)
{
    PyObject *code = (PyObject *)frame->f_code;
    if (h->mode == MODE_WAITING && matches(h, code)) { /* begin: the open frames are recorded, this one as a CALL */
        PyObject *caller = (PyObject *)PyEval_GetFrame(); /* borrowed; the matching frame is not running yet */
        Py_XDECREF(ct_call(h->on_match, caller != NULL ? caller : Py_None, h->base.on_error));
        id = codetable_get(h->base.table, code);
    }
    if (id < 0)
        id = (int32_t)ct_call_for_id(h->base.classify, code, h->base.on_error);
    if (id <= 0 || active != h || CREATES_GENERATOR(frame))
        return evaluate(ts, frame, throwflag);
    if (h->mode == MODE_WAITING)
        return run_before_start(h, ts, frame, throwflag, id);
    return h->mode == MODE_TRACING ? record(h, ts, frame, throwflag, id) : evaluate(ts, frame, throwflag);
}

static PyObject *ct_eval(PyThreadState *ts, EvalFrame *frame, int throwflag)
{
    EvalHook *h = active;
    if (h == NULL || h->mode == MODE_OFF)
        return evaluate(ts, frame, throwflag);
    PyObject *code = (PyObject *)frame->f_code;
    int32_t id = codetable_get(h->base.table, code);
    if (id == 0 && h->mode == MODE_TRACING)
        return evaluate(ts, frame, throwflag); /* the common case: unselected code, known already */
    if (ct_in_hook || (id == 0 && codetable_get(h->waited, code) == 0))
        return evaluate(ts, frame, throwflag); /* the tracer's own calls; or waiting, and neither selected nor it */
    Py_INCREF(h);
    PyObject *result = eval_with(h, ts, frame, throwflag, id);
    Py_DECREF(h);
    return result;
}

static void install(EvalHook *h, int mode)
{
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    if (_PyInterpreterState_GetEvalFrameFunc(interp) != ct_eval) {
        next_eval = _PyInterpreterState_GetEvalFrameFunc(interp);
        _PyInterpreterState_SetEvalFrameFunc(interp, ct_eval);
    }
    if (active != h) {
        EvalHook *old = active;
        active = (EvalHook *)Py_NewRef(h);
        Py_XDECREF(old);
    }
    h->mode = mode;
}

static PyObject *hook_wait(EvalHook *h, PyObject *args)
{
    PyObject *matcher, *on_match;
    if (!PyArg_ParseTuple(args, "OO:wait", &matcher, &on_match))
        return NULL;
    Py_XSETREF(h->matcher, Py_NewRef(matcher));
    Py_XSETREF(h->on_match, Py_NewRef(on_match));
    if (h->waited == NULL && (h->waited = (CodeTable *)PyObject_CallNoArgs((PyObject *)&CodeTable_Type)) == NULL)
        return NULL;
    install(h, MODE_WAITING);
    Py_RETURN_NONE;
}

static PyObject *hook_begin(EvalHook *h, PyObject *unused)
{
    install(h, MODE_TRACING);
    Py_RETURN_NONE;
}

/* Another tool may have installed its evaluation function over ours meanwhile, calling ours in turn: then ours
 * stays, passing every frame straight on. */
static PyObject *hook_end(EvalHook *h, PyObject *unused)
{
    h->mode = MODE_OFF;
    if (active == h) {
        active = NULL;
        PyInterpreterState *interp = PyThreadState_Get()->interp;
        if (_PyInterpreterState_GetEvalFrameFunc(interp) == ct_eval)
            _PyInterpreterState_SetEvalFrameFunc(interp, next_eval);
        Py_DECREF(h);
    }
    Py_RETURN_NONE;
}

/* adopt(frame, state): frame, selected and running, was just recorded as OPEN, the innermost entry of state. */
static PyObject *hook_adopt(EvalHook *h, PyObject *args)
{
    PyObject *frame;
    ThreadState *st;
    if (!PyArg_ParseTuple(args, "O!O!:adopt", &PyFrame_Type, &frame, &ThreadState_Type, &st))
        return NULL;
    PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)frame);
    int32_t id = codetable_get(h->base.table, code);
    Py_DECREF(code);
    if (threadstate_note_open(st, (Py_ssize_t)st->depth - 1, ct_frame_identity(frame), id > 0 ? id : 0) < 0)
        return PyErr_NoMemory();
    st->n_open = (Py_ssize_t)st->depth;
    Py_RETURN_NONE;
}

static PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    EvalHook *h = (EvalHook *)type->tp_alloc(type, 0);
    if (h != NULL && ct_hook_base_parse(&h->base, args, kwds, "EvalHook", NULL) < 0)
        Py_CLEAR(h);
    return (PyObject *)h;
}

static int hook_traverse(EvalHook *h, visitproc visit, void *arg)
{
    Py_VISIT(h->matcher);
    Py_VISIT(h->on_match);
    Py_VISIT(h->waited);
    return ct_hook_base_traverse(&h->base, visit, arg);
}

static int hook_clear(EvalHook *h)
{
    ct_hook_base_clear(&h->base);
    Py_CLEAR(h->matcher);
    Py_CLEAR(h->on_match);
    Py_CLEAR(h->waited);
    return 0;
}

static void hook_dealloc(EvalHook *h)
{
    PyObject_GC_UnTrack(h);
    hook_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyMethodDef hook_methods[] = {
    {"wait", (PyCFunction)hook_wait, METH_VARARGS, "wait(matcher, on_match): until the --start-at function starts"},
    {"begin", (PyCFunction)hook_begin, METH_NOARGS, "record the selected frames from now on"},
    {"end", (PyCFunction)hook_end, METH_NOARGS, "record nothing more; put the previous evaluation function back"},
    {"adopt", (PyCFunction)hook_adopt, METH_VARARGS, "adopt(frame, state): a frame recorded as OPEN at the start"},
    {NULL},
};

PyTypeObject EvalHook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracing.native._ctrace.EvalHook",
    .tp_doc = "EvalHook(writer, table, classify, on_error): the frame-evaluation hook of Python 3.10/3.11",
    .tp_basicsize = sizeof(EvalHook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = hook_new,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_methods = hook_methods,
};

#endif /* before 3.12 */
