/* The recording of ops on gradient tapes (pluggable/eager/tape.py), on the per-op path.
 *
 * While no tape records anywhere, `recorder` is NULL and an op pays that one test. While one
 * does, every op comes here. An op that a remembered plan runs (no Python on the way, so no
 * op inside it), whose inputs are tensors or plain values and which tape.py marked
 * recordable, is run and recorded here: for each recording of the calling thread that sees
 * one of its inputs (checked before the run: the outputs are new), the tuple (op_name, inputs,
 * outputs, attrs) is appended to the recording's op list, and each output's id maps to that
 * tuple in its tensor table (the tuple holds the output, so the id stays the output's).
 * Any other op goes to `recorder` (tape.py's `_recorder`), which does the same in Python
 * around the general path.
 *
 * What tape.py hands over (set_tape_recorder): the recorder; its per-thread state, whose
 * `recording` is the list of (tensor table, op list) pairs of the thread's recording tapes
 * (an empty tuple while the thread runs a recorded op's own work, which is not recorded);
 * and the table of op names this path may record (True). */
#include "compiled_internal.h"

static PyObject* recorder;     /* tape._recorder, or NULL while no tape records */
static PyObject* thread_state; /* tape's per-thread state (a threading.local) */
static PyObject* recordable;   /* op name -> True when recorded here */
static PyObject *s_recording, *s_stands_for_tensor;

#define MAX_RECORDED_INPUTS 16

PyObject* pg_tape_recorder(void) { return recorder; }

static PyObject* not_here(void) {
  Py_INCREF(Py_NotImplemented);
  return Py_NotImplemented;
}

/* Types found plain (a NumPy array, a NumPy scalar), held: a failed attribute lookup costs
 * more than the rest of the recording. */
#define PLAIN_TYPES 8
static PyTypeObject* plain_types[PLAIN_TYPES];

/* Whether `value` may be recorded as it is: anything but an object that stands for a tensor
 * (a Variable, read in Python so that the read is recorded) or a list of values. */
static int plain_input(PyObject* value, PyTypeObject* tensor_type) {
  PyTypeObject* type = Py_TYPE(value);
  if (type == tensor_type || type == &PyFloat_Type || type == &PyLong_Type) return 1;
  if (PyList_Check(value) || PyTuple_Check(value)) return 0;
  for (int i = 0; i < PLAIN_TYPES && plain_types[i] != NULL; i++) {
    if (plain_types[i] == type) return 1;
  }
  int has = PyObject_HasAttr((PyObject*)type, s_stands_for_tensor);
  if (has) return 0;
  for (int i = 0; i < PLAIN_TYPES; i++) {
    if (plain_types[i] == NULL) {
      Py_INCREF(type);
      plain_types[i] = type;
      break;
    }
  }
  return 1;
}

#define MAX_RECORDINGS 16

/* The tensor table and op list of `recording` (a (dict, list) pair); 0 with an error when it
 * is something else. */
static int parts_of(PyObject* recording, PyObject** tensors, PyObject** ops) {
  if (!PyTuple_CheckExact(recording) || PyTuple_GET_SIZE(recording) != 2 ||
      !PyDict_CheckExact(PyTuple_GET_ITEM(recording, 0)) ||
      !PyList_CheckExact(PyTuple_GET_ITEM(recording, 1))) {
    PyErr_SetString(PyExc_TypeError, "a tape recording must be a (dict, list) pair");
    return 0;
  }
  *tensors = PyTuple_GET_ITEM(recording, 0);
  *ops = PyTuple_GET_ITEM(recording, 1);
  return 1;
}

/* Whether the recording's table holds one of the `n` input ids: 1, 0, or -1 with an error. */
static int sees(PyObject* recording, PyObject* const* ids, Py_ssize_t n) {
  PyObject *tensors, *ops;
  if (!parts_of(recording, &tensors, &ops)) return -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    int found = PyDict_Contains(tensors, ids[i]);
    if (found != 0) return found;
  }
  return 0;
}

/* Appends `entry` to the recording's ops and maps each output's id to it (which holds the
 * output, so the id stays the output's while the tape lives). */
static int record_into(PyObject* recording, PyObject* entry, PyObject* outputs) {
  PyObject *tensors, *ops;
  if (!parts_of(recording, &tensors, &ops) || PyList_Append(ops, entry) < 0) return -1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(outputs); i++) {
    PyObject* out = PyList_GET_ITEM(outputs, i);
    PyObject* key = PyLong_FromVoidPtr(out);
    int failed = key == NULL || PyDict_SetItem(tensors, key, entry) < 0;
    Py_XDECREF(key);
    if (failed) return -1;
  }
  return 0;
}

/* Which of the recordings see one of the `n` inputs at `items` (`seen`), how many do, or -1
 * with an error. */
static int seeing(PyObject* recordings, PyObject* const* items, Py_ssize_t n, char* seen) {
  PyObject* ids[MAX_RECORDED_INPUTS];
  Py_ssize_t made = 0;
  int total = 0;
  for (; made < n; made++) {
    ids[made] = PyLong_FromVoidPtr(items[made]);
    if (ids[made] == NULL) {
      total = -1;
      break;
    }
  }
  for (Py_ssize_t r = 0; total >= 0 && r < PyList_GET_SIZE(recordings); r++) {
    int found = sees(PyList_GET_ITEM(recordings, r), ids, n);
    seen[r] = (char)(found > 0);
    total = found < 0 ? -1 : total + (found > 0);
  }
  for (Py_ssize_t i = 0; i < made; i++) Py_DECREF(ids[i]);
  return total;
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
  PyObject* recordings = PyObject_GetAttr(thread_state, s_recording);
  if (recordings == NULL) return NULL;
  if (!PyList_CheckExact(recordings) || PyList_GET_SIZE(recordings) == 0 ||
      PyList_GET_SIZE(recordings) > MAX_RECORDINGS) {
    Py_DECREF(recordings);
    return not_here(); /* nothing to record on here: the recorder runs it plainly */
  }
  char seen[MAX_RECORDINGS];
  int count = seeing(recordings, items, n, seen);
  PyObject* outputs = count < 0 ? NULL : pg_plan_outputs(op_name, inputs, attrs);
  if (outputs == NULL || !PyList_CheckExact(outputs)) { /* an error, or no plan ran it */
    Py_DECREF(recordings);
    if (outputs == NULL) return NULL;
    Py_DECREF(outputs);
    return not_here();
  }
  if (count > 0) {
    PyObject* held = PySequence_Tuple(inputs);
    PyObject* entry = held ? PyTuple_Pack(4, op_name, held, outputs,
                                          attrs == NULL || attrs == Py_None ? Py_None : attrs)
                           : NULL;
    int failed = entry == NULL;
    for (Py_ssize_t r = 0; !failed && r < PyList_GET_SIZE(recordings); r++) {
      if (seen[r]) failed = record_into(PyList_GET_ITEM(recordings, r), entry, outputs) < 0;
    }
    Py_XDECREF(entry);
    Py_XDECREF(held);
    if (failed) Py_CLEAR(outputs);
  }
  Py_DECREF(recordings);
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
  if (s_recording == NULL) {
    s_recording = PyUnicode_InternFromString("recording");
    s_stands_for_tensor = PyUnicode_InternFromString("__pluggable_tensor__");
    if (s_recording == NULL || s_stands_for_tensor == NULL) return NULL;
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
