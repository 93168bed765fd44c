/* The ledger of a stream's work, so that a tensor whose value was lost reads as lost.
 *
 * A plugin's stream error is sticky: the work that failed and every item after it on the
 * stream are not done, and the host learns of it only at its next wait. The runtime then
 * reports the error once and replaces the stream (devices.PluggableDevice.recover_streams).
 * Device memory that this unfinished work was to write holds whatever it held before; read
 * later, it would pass for the tensor's value.
 *
 * So every stream (stream.Stream._ledger) keeps a ledger: a count of the writes enqueued on
 * it (`issued`), the count up to which a successful wait has shown them done (`good`), and,
 * once the stream is found failed, the failure's words and the count at that moment
 * (`failed_after`). A device buffer written by work on the stream takes a stamp, the next
 * count (oprun.c's Buffer.stamp, the per-op path for kernel outputs). The buffer is lost when
 * its ledger failed and its stamp is above `failed_after`: written after the last point known
 * good. That is conservative: work between that point and the failure may have finished, but
 * the host cannot tell which; a wait that succeeded, or an event the event manager found
 * complete (event_manager.py, Marker), is the only evidence it has.
 *
 * Counts move under the GIL only. A stamp is taken after its work was enqueued, and a wait's
 * count (`mark()`) before the wait's own event is recorded, so a count a successful wait
 * passes to `verified()` covers only work that was ahead of that event. */
#include "compiled_internal.h" /* Python.h first */

#include "structmember.h"

static void ledger_dealloc(PgLedger* self) {
  Py_CLEAR(self->failure);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* ledger_mark(PgLedger* self, PyObject* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(self->issued);
}

static PyObject* ledger_verified(PgLedger* self, PyObject* arg) {
  unsigned long long upto = PyLong_AsUnsignedLongLong(arg);
  if (upto == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (upto > self->issued) {
    PyErr_Format(PyExc_ValueError,
                 "verified(%llu): only %llu writes were issued on the stream; pass a count "
                 "mark() returned", upto, (unsigned long long)self->issued);
    return NULL;
  }
  if (upto > self->good) self->good = upto;
  Py_RETURN_NONE;
}

static PyObject* ledger_fail(PgLedger* self, PyObject* message) {
  if (!PyUnicode_Check(message)) {
    PyErr_SetString(PyExc_TypeError, "fail(message): the message is a str");
    return NULL;
  }
  if (self->failure == NULL) { /* the first failure is the one the stream's work met */
    Py_INCREF(message);
    self->failure = message;
    self->failed_after = self->good;
  }
  Py_RETURN_NONE;
}

static PyObject* ledger_issue(PgLedger* self, PyObject* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(++self->issued);
}

static PyObject* ledger_lost(PgLedger* self, PyObject* arg) {
  unsigned long long stamp = PyLong_AsUnsignedLongLong(arg);
  if (stamp == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (!pg_ledger_lost(self, stamp)) Py_RETURN_NONE;
  Py_INCREF(self->failure);
  return self->failure;
}

static PyObject* ledger_failure(PgLedger* self, void* closure) {
  (void)closure;
  PyObject* failure = self->failure ? self->failure : Py_None;
  Py_INCREF(failure);
  return failure;
}

static PyMethodDef ledger_methods[] = {
    {"mark", (PyCFunction)ledger_mark, METH_NOARGS,
     "mark() -> the count of writes issued so far: take it before a wait, and pass it to "
     "verified() once the wait succeeded."},
    {"verified", (PyCFunction)ledger_verified, METH_O,
     "verified(count): every write up to `count` (a mark()) is known done without error."},
    {"issue", (PyCFunction)ledger_issue, METH_NOARGS,
     "issue() -> the stamp of a write just enqueued on the stream (memory other than a "
     "Buffer's: a variable's value)."},
    {"lost", (PyCFunction)ledger_lost, METH_O,
     "lost(stamp) -> None, or the failure (a str) when the write stamped `stamp` was lost."},
    {"fail", (PyCFunction)ledger_fail, METH_O,
     "fail(message): the stream failed; writes above the last verified count are lost. The "
     "first failure is kept."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef ledger_members[] = {
    {"issued", T_ULONGLONG, offsetof(PgLedger, issued), READONLY, "writes stamped so far"},
    {"good", T_ULONGLONG, offsetof(PgLedger, good), READONLY,
     "writes known done without error"},
    {"failed_after", T_ULONGLONG, offsetof(PgLedger, failed_after), READONLY,
     "once failed: writes above this count were lost"},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef ledger_getset[] = {
    {"failure", (getter)ledger_failure, NULL, "the failure's message once failed, else None",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject PgLedgerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.Ledger",
    .tp_basicsize = sizeof(PgLedger),
    .tp_dealloc = (destructor)ledger_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The count of a stream's writes, the count known done, and its failure.",
    .tp_methods = ledger_methods,
    .tp_members = ledger_members,
    .tp_getset = ledger_getset,
    .tp_new = PyType_GenericNew,
};

PgLedger* pg_stream_ledger(PyObject* stream, const char* who) {
  PyObject* ledger = PyObject_GetAttrString(stream, "_ledger");
  if (ledger == NULL) return NULL;
  if (!PyObject_TypeCheck(ledger, &PgLedgerType)) {
    PyErr_Format(PyExc_TypeError, "%s: the stream's _ledger is a %.100s, not a Ledger", who,
                 Py_TYPE(ledger)->tp_name);
    Py_DECREF(ledger);
    return NULL;
  }
  return (PgLedger*)ledger;
}

int pg_ledger_init(PyObject* module) {
  if (PyType_Ready(&PgLedgerType) < 0) return -1;
  Py_INCREF(&PgLedgerType);
  if (PyModule_AddObject(module, "Ledger", (PyObject*)&PgLedgerType) < 0) {
    Py_DECREF(&PgLedgerType);
    return -1;
  }
  return 0;
}
