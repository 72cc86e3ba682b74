/* CodeTable: code object -> code id, looked up by pointer in a few instructions.
 *
 * The hooks ask it for every Python frame (the eval hook) or every first event of a code object (sys.monitoring),
 * so it must be cheaper than a dict, which hashes a code object by its contents on every lookup. It is open
 * addressing with linear probing over the pointer; entries are never removed, only all at once when the table
 * goes away. Each key is held by a strong reference, so that its address cannot be reused by another code object.
 * Python sees a small mapping (get, [], in, len, items): the tracer's classify stores its answers here, and the
 * tracer's Python code reads them back, so there is one selection cache for both languages.
 */
#include "ctrace.h"

#define FIRST_CAPACITY 1024

static int table_alloc(CodeTable *t, size_t capacity)
{
    t->entries = PyMem_Calloc(capacity, sizeof(CtEntry));
    if (t->entries == NULL)
        return -1;
    t->mask = capacity - 1;
    int bits = 0;
    while (((size_t)1 << bits) < capacity)
        bits++;
    t->shift = 64 - bits;
    return 0;
}

static void insert_new(CodeTable *t, PyObject *code, int32_t id)
{
    size_t i = (size_t)((((uintptr_t)code >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
    while (t->entries[i].code != NULL)
        i = (i + 1) & t->mask;
    t->entries[i].code = code;
    t->entries[i].id = id;
}

static int grow(CodeTable *t)
{
    CtEntry *old = t->entries;
    size_t old_capacity = t->mask + 1;
    if (table_alloc(t, old_capacity * 2) < 0) {
        t->entries = old;
        return -1;
    }
    for (size_t i = 0; i < old_capacity; i++)
        if (old[i].code != NULL)
            insert_new(t, old[i].code, old[i].id);
    PyMem_Free(old);
    return 0;
}

/* Sets no Python exception (hooks call it while the program may have one pending): -1 when out of memory. */
int codetable_set(CodeTable *t, PyObject *code, int32_t id)
{
    size_t i = (size_t)((((uintptr_t)code >> 4) * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
    for (;; i = (i + 1) & t->mask) {
        CtEntry *e = &t->entries[i];
        if (e->code == code) {
            e->id = id;
            return 0;
        }
        if (e->code == NULL)
            break;
    }
    if ((t->used + 1) * 2 > t->mask + 1 && grow(t) < 0)
        return -1;
    Py_INCREF(code);
    insert_new(t, code, id);
    t->used++;
    return 0;
}

static PyObject *table_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if ((kwds != NULL && PyDict_GET_SIZE(kwds)) || PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "CodeTable() takes no arguments");
        return NULL;
    }
    CodeTable *t = (CodeTable *)type->tp_alloc(type, 0);
    if (t != NULL && table_alloc(t, FIRST_CAPACITY) < 0) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    return (PyObject *)t;
}

static void table_dealloc(CodeTable *t)
{
    if (t->entries != NULL) {
        for (size_t i = 0; i <= t->mask; i++)
            Py_XDECREF(t->entries[i].code);
        PyMem_Free(t->entries);
    }
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int check_code(PyObject *key)
{
    if (PyCode_Check(key))
        return 0;
    PyErr_Format(PyExc_TypeError, "CodeTable keys are code objects, not %.100s", Py_TYPE(key)->tp_name);
    return -1;
}

static PyObject *table_get(CodeTable *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(code, default=None)");
        return NULL;
    }
    int32_t id = PyCode_Check(args[0]) ? codetable_get(t, args[0]) : -1;
    if (id >= 0)
        return PyLong_FromLong(id);
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

static PyObject *table_items(CodeTable *t, PyObject *unused)
{
    PyObject *items = PyList_New(0);
    for (size_t i = 0; items != NULL && i <= t->mask; i++) {
        if (t->entries[i].code == NULL)
            continue;
        PyObject *pair = Py_BuildValue("(Oi)", t->entries[i].code, (int)t->entries[i].id);
        if (pair == NULL || PyList_Append(items, pair) < 0)
            Py_CLEAR(items);
        Py_XDECREF(pair);
    }
    return items;
}

static Py_ssize_t table_len(CodeTable *t) { return (Py_ssize_t)t->used; }

static PyObject *table_subscript(CodeTable *t, PyObject *key)
{
    int32_t id = PyCode_Check(key) ? codetable_get(t, key) : -1;
    if (id < 0) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return PyLong_FromLong(id);
}

static int table_ass_subscript(CodeTable *t, PyObject *key, PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "CodeTable entries cannot be removed");
        return -1;
    }
    if (check_code(key) < 0)
        return -1;
    long id = PyLong_AsLong(value);
    if (id == -1 && PyErr_Occurred())
        return -1;
    if (id < 0 || id > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "code id %ld out of range", id);
        return -1;
    }
    if (codetable_set(t, key, (int32_t)id) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int table_contains(CodeTable *t, PyObject *key)
{
    return PyCode_Check(key) && codetable_get(t, key) >= 0;
}

static PyMethodDef table_methods[] = {
    {"get", (PyCFunction)(void (*)(void))table_get, METH_FASTCALL, "get(code, default=None): the code id or default"},
    {"items", (PyCFunction)table_items, METH_NOARGS, "[(code, code id), ...]"},
    {NULL},
};

static PyMappingMethods table_as_mapping = {
    .mp_length = (lenfunc)table_len,
    .mp_subscript = (binaryfunc)table_subscript,
    .mp_ass_subscript = (objobjargproc)table_ass_subscript,
};

static PySequenceMethods table_as_sequence = {.sq_contains = (objobjproc)table_contains};

PyTypeObject CodeTable_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracing.native._ctrace.CodeTable",
    .tp_doc = "code object -> code id (0: not selected), looked up by pointer",
    .tp_basicsize = sizeof(CodeTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = table_new,
    .tp_dealloc = (destructor)table_dealloc,
    .tp_methods = table_methods,
    .tp_as_mapping = &table_as_mapping,
    .tp_as_sequence = &table_as_sequence,
};
