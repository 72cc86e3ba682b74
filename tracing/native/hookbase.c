/* What the two hooks (evalhook.c before 3.12, monitor.c after) hold in common, and how they are made:
 *
 *   EvalHook(writer, table, classify, on_error)
 *   MonitorHook(writer, table, classify, on_error, disable)
 *
 * writer is the recorder's C Writer, table the selection (a CodeTable), classify the tracer's classification
 * (code -> code id, stored into table) and on_error the tracer's handler of a failed hook.
 */
#include "ctrace.h"

/* Fills base from the constructor's arguments; *extra gets the fifth one when extra is not NULL. */
int ct_hook_base_parse(CtHookBase *base, PyObject *args, PyObject *kwds, const char *type_name, PyObject **extra)
{
    static char *four[] = {"writer", "table", "classify", "on_error", NULL};
    static char *five[] = {"writer", "table", "classify", "on_error", "disable", NULL};
    PyObject *writer, *table, *classify, *on_error;
    char format[64];
    PyOS_snprintf(format, sizeof format, "O!O!OO%s:%s", extra != NULL ? "O" : "", type_name);
    if (!PyArg_ParseTupleAndKeywords(args, kwds, format, extra != NULL ? five : four, &Writer_Type, &writer,
                                     &CodeTable_Type, &table, &classify, &on_error, extra))
        return -1;
    base->writer = (Writer *)Py_NewRef(writer);
    base->table = (CodeTable *)Py_NewRef(table);
    base->classify = Py_NewRef(classify);
    base->on_error = Py_NewRef(on_error);
    if (extra != NULL)
        Py_INCREF(*extra);
    return 0;
}

int ct_hook_base_traverse(CtHookBase *base, visitproc visit, void *arg)
{
    Py_VISIT(base->writer);
    Py_VISIT(base->table);
    Py_VISIT(base->classify);
    Py_VISIT(base->on_error);
    return 0;
}

void ct_hook_base_clear(CtHookBase *base)
{
    Py_CLEAR(base->writer);
    Py_CLEAR(base->table);
    Py_CLEAR(base->classify);
    Py_CLEAR(base->on_error);
}
