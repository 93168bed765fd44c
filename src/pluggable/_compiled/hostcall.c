/* Python host callbacks (SP_StreamExecutor.host_callback): the C function plugins call, and
 * the count of those enqueued and not yet finished.
 *
 * The per-op path (oprun.c) keeps the GIL through a small kernel run, and a plugin's kernel
 * may wait for its stream (a launch-blocking plugin does so every time). When the stream has
 * a Python host callback queued, the worker that reaches it needs the GIL to run it: a run
 * that kept the GIL while waiting would wait forever. So the executor counts a callback in
 * (host_callback_added) before handing it to the plugin, and it is counted out when it was
 * discarded unrun (host_callback_dropped) or, here, once it has run and given the GIL back;
 * while the count is not zero every run releases the GIL. Counting out only after the GIL is
 * released matters: a callback counted out while it still needed to take the GIL again
 * could meet a run that kept it. Only Python threads enqueue callbacks, holding the GIL, so
 * a run that saw zero keeps seeing zero until it gives the GIL up. */
#include "compiled_internal.h" /* Python.h first */

#include <stdatomic.h>
#include <stdint.h>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

static atomic_long pending;
static PyObject* run_callback; /* _CallbackRegistry._run(token, status address) -> bool */

int pg_host_callbacks_pending(void) {
  return atomic_load_explicit(&pending, memory_order_relaxed) != 0;
}

static int finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

/* The SE_StatusCallbackFn of every Python host callback; `token` finds the callable. */
static void host_callback_entry(void* const token, TF_Status* const status) {
  /* While the interpreter shuts down, taking the GIL could end this (the plugin's) thread. */
  if (finalizing()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  int ran = 0;
  PyObject* r = run_callback == NULL ? NULL
      : PyObject_CallFunction(run_callback, "KK", (unsigned long long)(uintptr_t)token,
                              (unsigned long long)(uintptr_t)status);
  if (r == NULL) {
    /* The registry's own failure (the callable's exceptions are handled there). Whether the
     * callback was taken off the registry is unknown: it stays counted, which only makes
     * every run release the GIL. */
    if (PyErr_Occurred()) PyErr_WriteUnraisable(run_callback);
  } else {
    ran = PyObject_IsTrue(r) == 1;
    Py_DECREF(r);
  }
  PyGILState_Release(gil);
  if (ran) atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
}

static const SE_StatusCallbackFn entry = host_callback_entry;

static PyObject* fast_bind_host_callbacks(PyObject* self, PyObject* run) {
  (void)self;
  if (!PyCallable_Check(run)) {
    PyErr_SetString(PyExc_TypeError, "bind_host_callbacks takes the registry's run function");
    return NULL;
  }
  Py_INCREF(run);
  Py_XSETREF(run_callback, run);
  return PyLong_FromVoidPtr(*(void**)&entry);
}

static PyObject* fast_host_callback_added(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  atomic_fetch_add_explicit(&pending, 1, memory_order_relaxed);
  Py_RETURN_NONE;
}

static PyObject* fast_host_callback_dropped(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  atomic_fetch_sub_explicit(&pending, 1, memory_order_relaxed);
  Py_RETURN_NONE;
}

static PyObject* fast_host_callbacks_pending(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(atomic_load_explicit(&pending, memory_order_relaxed));
}

PyMethodDef pg_hostcall_methods[] = {
    {"bind_host_callbacks", (PyCFunction)fast_bind_host_callbacks, METH_O,
     "bind_host_callbacks(run): the address of the SE_StatusCallbackFn that calls "
     "run(token, status address) with the GIL; run returns whether it ran a callback."},
    {"host_callback_added", (PyCFunction)fast_host_callback_added, METH_NOARGS,
     "host_callback_added(): a host callback is about to be handed to a plugin."},
    {"host_callback_dropped", (PyCFunction)fast_host_callback_dropped, METH_NOARGS,
     "host_callback_dropped(): a counted host callback will never run."},
    {"host_callbacks_pending", (PyCFunction)fast_host_callbacks_pending, METH_NOARGS,
     "host_callbacks_pending(): host callbacks handed to plugins and not yet run."},
    {NULL, NULL, 0, NULL}};
