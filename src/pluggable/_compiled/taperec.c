/* The recording of ops on gradient tapes (pluggable/eager/tape.py), on the per-op path.
 *
 * While no tape records anywhere, `recorder` is NULL and an op pays that one test. While one
 * does, every op comes here. An op that a remembered plan runs (no Python on the way, so no
 * op inside it), whose inputs are tensors or plain values and which tape.py marked
 * recordable, is run and recorded here: for each recording of the calling thread that sees
 * one of its inputs, the tuple (op_name, inputs, outputs, attrs) is appended to the
 * recording's op list and each output's id maps to (output, that tuple) in its tensor table.
 * Any other op goes to `recorder` (tape.py's `_recorder`), which does the same in Python
 * around the general path.
 *
 * What tape.py hands over (set_tape_recorder): the recorder; its per-thread state, whose
 * `busy` is true while the thread runs a recorded op's own work and whose `recording` is the
 * list of (tensor table, op list) pairs of the thread's recording tapes; and the table of op
 * names this path may record (True). */
#include "compiled_internal.h"

static PyObject* recorder;     /* tape._recorder, or NULL while no tape records */
static PyObject* thread_state; /* tape's per-thread state (a threading.local) */
static PyObject* recordable;   /* op name -> True when recorded here */
static PyObject *s_busy, *s_recording, *s_stands_for_tensor;

#define MAX_RECORDED_INPUTS 16

PyObject* pg_tape_recorder(void) { return recorder; }

static PyObject* not_here(void) {
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

/* Whether `value` may be recorded as it is: anything but an object that stands for a tensor
 * (a Variable, read in Python so that the read is recorded) or a list of values. */
static int plain_input(PyObject* value, PyTypeObject* tensor_type) {
  PyTypeObject* type = Py_TYPE(value);
  if (type == tensor_type || type == &PyFloat_Type || type == &PyLong_Type) return 1;
  if (PyList_Check(value) || PyTuple_Check(value)) return 0;
  int has = PyObject_HasAttr((PyObject*)type, s_stands_for_tensor);
  return !has;
}

/* Records `entry`'s outputs in `recording` (a (tensor table, op list) pair) when one of the
 * `n` inputs (their ids in `ids`) is in its table: 1 recorded, 0 not, -1 error. */
static int record_on(PyObject* recording, PyObject* const* ids, Py_ssize_t n,
                     PyObject* entry, PyObject* outputs) {
  if (!PyTuple_CheckExact(recording) || PyTuple_GET_SIZE(recording) != 2) {
    PyErr_SetString(PyExc_TypeError, "a tape recording must be a (tensors, ops) pair");
    return -1;
  }
  PyObject* tensors = PyTuple_GET_ITEM(recording, 0);
  PyObject* ops = PyTuple_GET_ITEM(recording, 1);
  if (!PyDict_CheckExact(tensors) || !PyList_CheckExact(ops)) {
    PyErr_SetString(PyExc_TypeError, "a tape recording must be a (dict, list) pair");
    return -1;
  }
  int seen = 0;
  for (Py_ssize_t i = 0; i < n && !seen; i++) {
    seen = PyDict_Contains(tensors, ids[i]);
    if (seen < 0) return -1;
  }
  if (!seen) return 0;
  if (PyList_Append(ops, entry) < 0) return -1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(outputs); i++) {
    PyObject* out = PyList_GET_ITEM(outputs, i);
    PyObject* key = PyLong_FromVoidPtr(out);
    PyObject* value = key ? PyTuple_Pack(2, out, entry) : NULL;
    int failed = value == NULL || PyDict_SetItem(tensors, key, value) < 0;
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (failed) return -1;
  }
  return 1;
}

/* The op run and recorded here; NotImplemented when it must go to the recorder (before
 * anything ran). */
static PyObject* record_here(PyObject* op_name, PyObject* inputs, PyObject* attrs) {
  if (thread_state == NULL || (!PyTuple_CheckExact(inputs) && !PyList_CheckExact(inputs))) {
    return not_here();
  }
  PyObject* mark = PyDict_GetItemWithError(recordable, op_name);
  if (mark != Py_True) return mark == NULL && PyErr_Occurred() ? NULL : not_here();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(inputs);
  if (n > MAX_RECORDED_INPUTS) return not_here();
  PyObject* const* items = PySequence_Fast_ITEMS(inputs);
  PyTypeObject* tensor_type = pg_tensor_type();
  for (Py_ssize_t i = 0; i < n; i++) {
    int plain = plain_input(items[i], tensor_type);
    if (plain <= 0) return plain < 0 ? NULL : not_here();
  }
  PyObject* busy = PyObject_GetAttr(thread_state, s_busy);
  if (busy == NULL) return NULL;
  int is_busy = PyObject_IsTrue(busy);
  Py_DECREF(busy);
  if (is_busy) return is_busy < 0 ? NULL : not_here();
  PyObject* recordings = PyObject_GetAttr(thread_state, s_recording);
  if (recordings == NULL) return NULL;
  if (!PyList_CheckExact(recordings) || PyList_GET_SIZE(recordings) == 0) {
    Py_DECREF(recordings);
    return not_here(); /* this thread records nothing: the recorder runs it plainly */
  }
  PyObject* outputs = pg_plan_outputs(op_name, inputs, attrs);
  if (outputs == NULL || !PyList_CheckExact(outputs)) { /* no plan ran it */
    Py_DECREF(recordings);
    if (outputs == NULL) return NULL;
    Py_DECREF(outputs);
    return not_here();
  }
  PyObject* ids[MAX_RECORDED_INPUTS];
  Py_ssize_t made = 0;
  PyObject* entry = NULL;
  PyObject* held = PySequence_Tuple(inputs);
  int failed = held == NULL;
  for (; !failed && made < n; made++) {
    ids[made] = PyLong_FromVoidPtr(items[made]);
    if (ids[made] == NULL) failed = 1;
  }
  if (failed && made > 0) made--; /* the id that failed was not made */
  if (!failed) {
    entry = PyTuple_Pack(4, op_name, held, outputs,
                         attrs == NULL || attrs == Py_None ? Py_None : attrs);
    failed = entry == NULL;
  }
  for (Py_ssize_t r = 0; !failed && r < PyList_GET_SIZE(recordings); r++) {
    failed = record_on(PyList_GET_ITEM(recordings, r), ids, n, entry, outputs) < 0;
  }
  for (Py_ssize_t i = 0; i < made; i++) Py_DECREF(ids[i]);
  Py_XDECREF(entry);
  Py_XDECREF(held);
  Py_DECREF(recordings);
  if (failed) {
    Py_DECREF(outputs);
    return NULL;
  }
  return outputs;
}

PyObject* pg_record_on_tape(PyObject* op_name, PyObject* inputs, PyObject* attrs) {
  PyObject* outputs = record_here(op_name, inputs, attrs);
  if (outputs != Py_NotImplemented) return outputs;
  Py_DECREF(outputs);
  PyObject* call[3] = {op_name, inputs, attrs == NULL ? Py_None : attrs};
  return PyObject_Vectorcall(recorder, call, 3, NULL);
}

/* set_tape_recorder(recorder, thread_state, recordable), or set_tape_recorder(None). */
static PyObject* fast_set_tape_recorder(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *function, *state = Py_None, *table = Py_None;
  if (!PyArg_ParseTuple(args, "O|OO:set_tape_recorder", &function, &state, &table)) {
    return NULL;
  }
  if (function == Py_None) {
    Py_CLEAR(recorder);
    Py_RETURN_NONE;
  }
  if (!PyCallable_Check(function) || state == Py_None || !PyDict_Check(table)) {
    PyErr_SetString(PyExc_TypeError,
                    "set_tape_recorder(recorder, thread_state, recordable): a callable, the "
                    "per-thread state and a dict");
    return NULL;
  }
  if (s_busy == NULL) {
    s_busy = PyUnicode_InternFromString("busy");
    s_recording = PyUnicode_InternFromString("recording");
    s_stands_for_tensor = PyUnicode_InternFromString("__pluggable_tensor__");
    if (s_busy == NULL || s_recording == NULL || s_stands_for_tensor == NULL) return NULL;
  }
  Py_INCREF(state);
  Py_XSETREF(thread_state, state);
  Py_INCREF(table);
  Py_XSETREF(recordable, table);
  Py_INCREF(function);
  Py_XSETREF(recorder, function);
  Py_RETURN_NONE;
}

PyMethodDef pg_taperec_methods[] = {
    {"set_tape_recorder", (PyCFunction)fast_set_tape_recorder, METH_VARARGS,
     "set_tape_recorder(recorder, thread_state, recordable) while a tape records: every op "
     "is then recorded here or by recorder(op_name, inputs, attrs), which runs it and returns "
     "its outputs; set_tape_recorder(None) when none records."},
    {NULL, NULL, 0, NULL},
};
