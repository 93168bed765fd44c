/* Plans of calls with attributes or host values, in C: `ops.reduce_sum(x, axis=0)`,
 * `ops.cast(x, "float64")`, a transposed matmul.
 *
 * dispatch remembers such a call as a plan whose host-memory inputs (a reduction's axes, a
 * reshape's shape) are constants, under a key that holds everything the run depends on: the
 * op, the device scope, each device input's (dtype code, shape, device), each host input's
 * value and the attributes (dispatch._constant_plan_key, execute_with_constants). The key is
 * built here, for dispatch and for `execute_constants`, which runs a call's plan with no
 * Python code on the way. Built in Python, the key cost about 2 µs a call, more than the
 * run it looked up.
 *
 * A value becomes a hashable key part tagged with its type, so that 1, 1.0 and True stay
 * three keys: (type, value) for a hashable value, (type, parts) for a list or a tuple, and
 * (ndarray, buffer format, shape, bytes) for a C-contiguous NumPy array of at most
 * MAX_HOST_VALUES elements. A value that cannot be a key part (unhashable, NaN, which is
 * never equal to itself, an array that is too large, of objects or not contiguous) makes the
 * whole call keyless: it takes the general path. */
#include "compiled_internal.h"

#include <math.h>
#include <string.h>

#define MAX_HOST_VALUES 64 /* elements; larger host values are not worth a key */
#define MAX_DEPTH 8        /* nested lists deeper than this are not keyed */
#define MAX_INPUTS 16      /* calls with more inputs are not looked up here */

static PyObject* host_inputs;     /* dispatch._host_inputs: op name -> bool per input, or None */
static PyObject* host_flags;      /* dispatch._host_flags(op_name): fills host_inputs */
static PyObject* cpu_device;      /* tensors.CPU_DEVICE: its tensors never make a plan */
static PyTypeObject* array_type;  /* numpy.ndarray */
static PyObject* s_constants;     /* "constants", the key's second part */

enum { KEYLESS = 0, KEYED = 1, FAILED = -1 };

/* Sets *part to `value` as a key part; KEYLESS when it cannot be one. */
static int freeze(PyObject* value, PyObject** part, int depth) {
  PyTypeObject* type = Py_TYPE(value);
  if (type == pg_tensor_type()) return KEYLESS; /* its == and != are ops, not comparisons */
  if (PyList_Check(value) || PyTuple_Check(value)) {
    if (depth >= MAX_DEPTH) return KEYLESS;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    PyObject* parts = PyTuple_New(n);
    if (parts == NULL) return FAILED;
    for (Py_ssize_t i = 0; i < n; i++) {
      if (i >= PySequence_Fast_GET_SIZE(value)) { /* a list an item's __ne__ shortened */
        Py_DECREF(parts);
        return KEYLESS;
      }
      PyObject* item = PySequence_Fast_GET_ITEM(value, i);
      PyObject* frozen;
      Py_INCREF(item); /* kept while its own comparison runs */
      int r = freeze(item, &frozen, depth + 1);
      Py_DECREF(item);
      if (r != KEYED) {
        Py_DECREF(parts);
        return r;
      }
      PyTuple_SET_ITEM(parts, i, frozen);
    }
    *part = PyTuple_Pack(2, (PyObject*)type, parts);
    Py_DECREF(parts);
    return *part == NULL ? FAILED : KEYED;
  }
  if (array_type != NULL && PyObject_TypeCheck(value, array_type)) {
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Clear(); /* not contiguous, or a dtype the buffer protocol does not carry */
      return KEYLESS;
    }
    int r = KEYLESS;
    if (view.itemsize > 0 && view.len / view.itemsize <= MAX_HOST_VALUES && view.format != NULL &&
        strchr(view.format, 'O') == NULL) {
      PyObject* format = PyUnicode_FromString(view.format);
      PyObject* shape = format ? PyTuple_New(view.ndim) : NULL;
      for (int d = 0; shape != NULL && d < view.ndim; d++) {
        PyObject* extent = PyLong_FromSsize_t(view.shape[d]);
        if (extent == NULL) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, d, extent);
      }
      PyObject* bytes = shape ? PyBytes_FromStringAndSize(view.buf, view.len) : NULL;
      *part = bytes ? PyTuple_Pack(4, (PyObject*)array_type, format, shape, bytes) : NULL;
      r = *part == NULL ? FAILED : KEYED;
      Py_XDECREF(format);
      Py_XDECREF(shape);
      Py_XDECREF(bytes);
    }
    PyBuffer_Release(&view);
    return r;
  }
  if (PyFloat_CheckExact(value)) {
    if (isnan(PyFloat_AS_DOUBLE(value))) return KEYLESS;
  } else if (!PyLong_CheckExact(value) && !PyUnicode_CheckExact(value) && !PyBool_Check(value) &&
             value != Py_None) {
    if (PyObject_Hash(value) == -1) {
      PyErr_Clear();
      return KEYLESS;
    }
    PyObject* differs = PyObject_RichCompare(value, value, Py_NE); /* NaN-like values */
    int unequal = differs ? PyObject_IsTrue(differs) : -1;
    Py_XDECREF(differs);
    if (unequal != 0) {
      PyErr_Clear();
      return KEYLESS;
    }
  }
  *part = PyTuple_Pack(2, (PyObject*)type, value);
  return *part == NULL ? FAILED : KEYED;
}

/* Whether each input of `op_name` is in host memory (a new reference): a tuple of bools, or
 * None for an op whose calls are never keyed (or that does not exist). The table is filled by
 * dispatch the first time an op is asked about. */
static PyObject* hosts_of(PyObject* op_name) {
  if (host_inputs == NULL) Py_RETURN_NONE; /* dispatch not bound yet */
  PyObject* hosts = PyDict_GetItemWithError(host_inputs, op_name);
  if (hosts != NULL) {
    Py_INCREF(hosts);
    return hosts;
  }
  return PyErr_Occurred() ? NULL : PyObject_CallOneArg(host_flags, op_name);
}

/* The key of `op_name` on the `n` inputs at `items` with `attrs` (a dict or NULL), whose
 * inputs are in host memory where `hosts` says; None when keyless. A call with neither
 * attributes nor host inputs has none: its plan is the plain one (oprun.c's make_key). */
static PyObject* make_constant_key(PyObject* op_name, PyObject* const* items, Py_ssize_t n,
                                   PyObject* attrs, PyObject* hosts) {
  PyTypeObject* tensor_type = pg_tensor_type();
  if (!PyTuple_Check(hosts) || PyTuple_GET_SIZE(hosts) != n || tensor_type == NULL) {
    Py_RETURN_NONE;
  }
  if ((attrs == NULL || attrs == Py_None || (PyDict_Check(attrs) && PyDict_GET_SIZE(attrs) == 0)) &&
      PySequence_Contains(hosts, Py_True) == 0) {
    Py_RETURN_NONE;
  }
  PyObject* names = NULL;
  Py_ssize_t n_attrs = 0;
  if (attrs != NULL && attrs != Py_None) {
    if (!PyDict_Check(attrs)) Py_RETURN_NONE;
    names = PyDict_Keys(attrs);
    if (names == NULL) return NULL;
    if (PyList_Sort(names) < 0) { /* names that do not sort: the general path says what is wrong */
      PyErr_Clear();
      Py_DECREF(names);
      Py_RETURN_NONE;
    }
    n_attrs = PyList_GET_SIZE(names);
  }
  PyObject* key = PyTuple_New(3 + n + n_attrs);
  PyObject* scope = key ? pg_device_scope() : NULL;
  if (scope == NULL) goto failed;
  Py_INCREF(op_name);
  PyTuple_SET_ITEM(key, 0, op_name);
  Py_INCREF(s_constants);
  PyTuple_SET_ITEM(key, 1, s_constants);
  PyTuple_SET_ITEM(key, 2, scope);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* x = items[i];
    int host = PyTuple_GET_ITEM(hosts, i) == Py_True;
    PyObject* part;
    if (Py_TYPE(x) == tensor_type) {
      /* A host input given as a tensor, or a CPU tensor (which never makes a plan): keyless. */
      if (host) goto keyless;
      part = pg_tensor_signature(x);
      if (part == NULL) goto failed;
      if (part == Py_None || PyTuple_GET_ITEM(part, 2) == cpu_device) {
        Py_DECREF(part);
        goto keyless;
      }
    } else if (host) {
      int r = freeze(x, &part, 0);
      if (r == FAILED) goto failed;
      if (r == KEYLESS) goto keyless;
    } else {
      goto keyless; /* a list of tensors, a host value where the op wants device memory */
    }
    PyTuple_SET_ITEM(key, 3 + i, part);
  }
  for (Py_ssize_t i = 0; i < n_attrs; i++) {
    PyObject* name = PyList_GET_ITEM(names, i);
    PyObject* value = PyDict_GetItemWithError(attrs, name);
    PyObject* part;
    if (value == NULL) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "attributes changed during a call");
      goto failed;
    }
    int r = freeze(value, &part, 0);
    if (r == FAILED) goto failed;
    if (r == KEYLESS) goto keyless;
    PyObject* pair = PyTuple_Pack(2, name, part);
    Py_DECREF(part);
    if (pair == NULL) goto failed;
    PyTuple_SET_ITEM(key, 3 + n + i, pair);
  }
  Py_XDECREF(names);
  return key;
keyless:
  Py_XDECREF(names);
  Py_DECREF(key);
  Py_RETURN_NONE;
failed:
  Py_XDECREF(names);
  Py_XDECREF(key);
  return NULL;
}

/* constant_plan_key(op_name, inputs, attrs): the key, or None. */
static PyObject* fast_constant_plan_key(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "constant_plan_key(op_name, inputs, attrs)");
    return NULL;
  }
  PyObject* seq = PySequence_Fast(args[1], "constant_plan_key: inputs must be a sequence");
  PyObject* hosts = seq ? hosts_of(args[0]) : NULL;
  PyObject* key = hosts ? make_constant_key(args[0], PySequence_Fast_ITEMS(seq),
                                            PySequence_Fast_GET_SIZE(seq), args[2], hosts)
                        : NULL;
  Py_XDECREF(hosts);
  Py_XDECREF(seq);
  return key;
}

PyObject* pg_execute_constants(PyObject* op_name, PyObject* inputs, PyObject* attrs) {
  if (!PyList_CheckExact(inputs) && !PyTuple_CheckExact(inputs)) Py_RETURN_NONE;
  if (PySequence_Fast_GET_SIZE(inputs) > MAX_INPUTS) Py_RETURN_NONE; /* (no op has as many) */
  PyObject* hosts = hosts_of(op_name); /* held: the table could change while values are keyed */
  if (hosts == NULL) return NULL;
  /* A list is copied: a value's __hash__ or __ne__, run while keying, could change it. */
  PyObject* held = inputs;
  if (PyList_CheckExact(inputs)) held = PyList_AsTuple(inputs);
  else Py_INCREF(held);
  if (held == NULL) {
    Py_DECREF(hosts);
    return NULL;
  }
  PyObject* const* items = &PyTuple_GET_ITEM(held, 0);
  Py_ssize_t n = PyTuple_GET_SIZE(held);
  PyObject* result = make_constant_key(op_name, items, n, attrs, hosts);
  int usable = result != NULL && result != Py_None ? pg_plans_usable() : 0;
  if (usable < 0) Py_CLEAR(result);
  if (usable > 0) {
    PyObject* device_items[MAX_INPUTS];
    Py_ssize_t n_device = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
      if (PyTuple_GET_ITEM(hosts, i) != Py_True) device_items[n_device++] = items[i];
    }
    PyObject* outputs = pg_run_plan(result, device_items, n_device, op_name);
    if (outputs != Py_None) Py_SETREF(result, outputs); /* the outputs, or NULL */
    else Py_DECREF(outputs);
  }
  Py_DECREF(hosts);
  Py_DECREF(held);
  return result;
}

static PyObject* fast_execute_constants(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "execute_constants(op_name, inputs, attrs)");
    return NULL;
  }
  if (pg_tape_recorder() != NULL) return pg_record_on_tape(args[0], args[1], args[2]);
  return pg_execute_constants(args[0], args[1], args[2]);
}

/* bind_constants(host_inputs, host_flags, cpu_device, ndarray): what the keys need from
 * dispatch. */
static PyObject* fast_bind_constants(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *hosts, *flags, *cpu, *ndarray;
  if (!PyArg_ParseTuple(args, "O!OOO!:bind_constants", &PyDict_Type, &hosts, &flags, &cpu,
                        &PyType_Type, &ndarray)) {
    return NULL;
  }
  if (!PyCallable_Check(flags)) {
    PyErr_SetString(PyExc_TypeError, "bind_constants: host_flags must be callable");
    return NULL;
  }
  Py_INCREF(flags);
  Py_XSETREF(host_flags, flags);
  if (s_constants == NULL && (s_constants = PyUnicode_InternFromString("constants")) == NULL) {
    return NULL;
  }
  Py_INCREF(hosts);
  Py_XSETREF(host_inputs, hosts);
  Py_INCREF(cpu);
  Py_XSETREF(cpu_device, cpu);
  Py_INCREF(ndarray);
  Py_XSETREF(array_type, (PyTypeObject*)ndarray);
  Py_RETURN_NONE;
}

PyMethodDef pg_constplans_methods[] = {
    {"constant_plan_key", (PyCFunction)(void (*)(void))fast_constant_plan_key, METH_FASTCALL,
     "constant_plan_key(op_name, inputs, attrs): the key of a call with attributes or host "
     "values, or None when the call cannot have one."},
    {"execute_constants", (PyCFunction)(void (*)(void))fast_execute_constants, METH_FASTCALL,
     "execute_constants(op_name, inputs, attrs): the outputs of the call's remembered plan, "
     "else the call's key (a tuple), or None when it has none; with a gradient tape "
     "recording, the outputs of the tape's recorder."},
    {"bind_constants", (PyCFunction)fast_bind_constants, METH_VARARGS,
     "bind_constants(host_inputs, host_flags, cpu_device, ndarray)."},
    {NULL, NULL, 0, NULL},
};
