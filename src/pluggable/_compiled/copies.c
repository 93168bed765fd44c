/* Copies between host arrays and device tensors in C: the per-call path of
 * `pluggable.tensor(array, device=...)` and `Tensor.numpy()` on a device whose plugin copies
 * pageable host memory asynchronously (PLUGGABLE_PLATFORM_PAGEABLE_ASYNC_COPY).
 *
 * A Copier belongs to one device and its compute stream, where kernel outputs are made and
 * where these copies run (no stream dependency is needed). It holds one event of its own.
 *
 * upload(array, dtype): records the event and polls it first. Only if the stream is idle
 * does it allocate the tensor's memory, copy straight from the caller's array, record the
 * event again and poll it: a plugin that runs work on an idle stream at once (the XPU does)
 * has finished the copy by then, so the array is free to change and nothing waits. If the
 * stream is busy the call returns None and tensors.py takes its own path (the staging ring,
 * which does not wait for the queued work); after UPLOAD_MISSES such calls in a row, the next
 * UPLOAD_SKIPS uploads go there without asking, so that a plugin that never runs work at once
 * pays little for the question. If the copy is still pending after it was enqueued (another
 * thread's work came first), tensors._wait_for_stream waits for the copier's event.
 *
 * download(address, nbytes, out): copies a tensor's bytes into the host array `out`, records
 * the event and polls it; if the copy is pending, tensors._wait_for_stream waits for that
 * event (and raises the stream's error if the work failed).
 *
 * Both return None (download: False), before doing anything, when the copier is stale (the device closed, its
 * compute stream replaced or its allocator closed since it was made: the epoch of oprun.c),
 * busy in another thread, or a profiling session records (the Python path tells the host
 * tracer about copies and allocations), and for anything unusual; tensors.py then takes its
 * own path, which gives the full errors. A plugin's error from the copy or the event is
 * raised as executor._error words it. The GIL is released around the copy itself, unless
 * the copy is small and no Python host callback is pending (pg_keep_gil, oprun.c's policy for
 * kernel runs). */
#include "compiled_internal.h" /* Python.h first */

#include <string.h>

#include "runtime_internal.h"
#include "structmember.h"

typedef void (*HtoDFn)(const SP_Device*, SP_Stream, SP_DeviceMemoryBase*, const void*, uint64_t,
                       TF_Status*);
typedef void (*DtoHFn)(const SP_Device*, SP_Stream, void*, const SP_DeviceMemoryBase*, uint64_t,
                       TF_Status*);
typedef void (*RecordFn)(const SP_Device*, SP_Stream, SP_Event, TF_Status*);
typedef SE_EventStatus (*EventStatusFn)(const SP_Device*, SP_Event);

typedef struct {
  PyObject_HEAD
  PyObject* device;   /* devices.PluggableDevice */
  PyObject* executor; /* its StreamExecutor */
  PyObject* stream;   /* the device's compute stream when the copier was made */
  PyObject* allocator;
  PyObject* event;    /* the copier's own event.Event */
  PyObject* wait;     /* tensors._wait_for_stream(device, stream, keep, buffer, recorded) */
  PgLedger* ledger;   /* the stream's (ledger.c): a copy found done verifies its writes */
  const SP_Device* sp_device;
  SP_Stream sp_stream;
  SP_Event sp_event;
  PG_BFC* bfc;
  HtoDFn htod;
  DtoHFn dtoh;
  RecordFn record;
  EventStatusFn event_status;
  TF_Status* status;
  int busy;
  int stale;
  int misses;       /* uploads in a row that found the stream busy */
  int skip_uploads; /* uploads left to the Python path without asking the stream */
  unsigned long long fresh_epoch;
} CopierObject;

static PyObject *s_closed, *s_compute_stream, *s_allocator, *s_handle;

/* After this many uploads in a row that found the stream busy, the next UPLOAD_SKIPS go to
 * the Python path without asking. */
#define UPLOAD_MISSES 8
#define UPLOAD_SKIPS 256

static int copier_clear(CopierObject* c) {
  Py_CLEAR(c->device);
  Py_CLEAR(c->executor);
  Py_CLEAR(c->stream);
  Py_CLEAR(c->allocator);
  Py_CLEAR(c->event);
  Py_CLEAR(c->wait);
  Py_CLEAR(c->ledger);
  return 0;
}

static int copier_traverse(CopierObject* c, visitproc visit, void* arg) {
  Py_VISIT(c->device);
  Py_VISIT(c->executor);
  Py_VISIT(c->stream);
  Py_VISIT(c->allocator);
  Py_VISIT(c->event);
  Py_VISIT(c->wait);
  return 0;
}

static void copier_dealloc(CopierObject* c) {
  PyObject_GC_UnTrack(c);
  copier_clear(c);
  if (c->status != NULL && pg_runtime.delete_status != NULL) pg_runtime.delete_status(c->status);
  Py_TYPE(c)->tp_free((PyObject*)c);
}

/* Copier(device, event, functions, device_address, wait): `functions` maps memcpy_htod,
 * memcpy_dtoh, record_event and get_event_status to the plugin's function addresses;
 * `device_address` is the SP_Device*. */
static int copier_init(CopierObject* c, PyObject* args, PyObject* kwargs) {
  static char* names[] = {"device", "event", "functions", "device_address", "wait", NULL};
  PyObject *device, *event, *functions, *device_address, *wait;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!OO:Copier", names, &device, &event,
                                   &PyDict_Type, &functions, &device_address, &wait)) {
    return -1;
  }
  if (pg_runtime.new_status == NULL || pg_tensor_type() == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "pluggable._compiled is not bound to the runtime library");
    return -1;
  }
  copier_clear(c);
  c->stale = 0;
  c->fresh_epoch = pg_epoch();
  PyObject* executor = PyObject_GetAttrString(device, "executor");
  PyObject* stream = executor ? PyObject_GetAttr(device, s_compute_stream) : NULL;
  PyObject* allocator = stream ? PyObject_GetAttr(executor, s_allocator) : NULL;
  PyObject* bfc = allocator && allocator != Py_None ? PyObject_GetAttr(allocator, s_handle) : NULL;
  PyObject* stream_handle = bfc ? PyObject_GetAttr(stream, s_handle) : NULL;
  PyObject* event_handle = stream_handle ? PyObject_GetAttr(event, s_handle) : NULL;
  int ok = -1;
  if (event_handle == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Copier: the device has no allocator");
    goto done;
  }
  if (bfc == Py_None) {
    PyErr_SetString(PyExc_ValueError, "Copier: the device's allocator is closed");
    goto done;
  }
  c->bfc = (PG_BFC*)PyLong_AsVoidPtr(bfc);
  c->sp_device = (const SP_Device*)PyLong_AsVoidPtr(device_address);
  c->sp_stream = stream_handle == Py_None ? NULL : (SP_Stream)PyLong_AsVoidPtr(stream_handle);
  c->sp_event = event_handle == Py_None ? NULL : (SP_Event)PyLong_AsVoidPtr(event_handle);
  if (PyErr_Occurred()) goto done;
  void* htod = pg_function_address(functions, "memcpy_htod", "Copier");
  void* dtoh = htod ? pg_function_address(functions, "memcpy_dtoh", "Copier") : NULL;
  void* record = dtoh ? pg_function_address(functions, "record_event", "Copier") : NULL;
  void* status = record ? pg_function_address(functions, "get_event_status", "Copier") : NULL;
  if (status == NULL) goto done;
  *(void**)&c->htod = htod;
  *(void**)&c->dtoh = dtoh;
  *(void**)&c->record = record;
  *(void**)&c->event_status = status;
  if (c->status == NULL && (c->status = pg_runtime.new_status()) == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  Py_INCREF(device);
  c->device = device;
  c->executor = executor;
  executor = NULL;
  c->stream = stream;
  stream = NULL;
  c->allocator = allocator;
  allocator = NULL;
  Py_INCREF(event);
  c->event = event;
  Py_INCREF(wait);
  c->wait = wait;
  if ((c->ledger = pg_stream_ledger(c->stream, "Copier")) == NULL) goto done;
  ok = 0;
done:
  Py_XDECREF(executor);
  Py_XDECREF(stream);
  Py_XDECREF(allocator);
  Py_XDECREF(bfc);
  Py_XDECREF(stream_handle);
  Py_XDECREF(event_handle);
  return ok;
}

/* Whether the copier may run: the device open with the same compute stream and the same
 * open allocator. Checked again only after something was closed or replaced (the epoch). */
static int copier_fresh(CopierObject* c) {
  if (c->stale || c->device == NULL) return 0;
  unsigned long long now = pg_epoch();
  if (c->fresh_epoch == now) return 1;
  PyObject* closed = PyObject_GetAttr(c->device, s_closed);
  PyObject* stream = closed ? PyObject_GetAttr(c->device, s_compute_stream) : NULL;
  PyObject* executor_closed = stream ? PyObject_GetAttr(c->executor, s_closed) : NULL;
  PyObject* allocator = executor_closed ? PyObject_GetAttr(c->executor, s_allocator) : NULL;
  PyObject* handle = allocator && allocator == c->allocator ? PyObject_GetAttr(allocator, s_handle)
                                                            : NULL;
  int fresh = handle != NULL && closed == Py_False && executor_closed == Py_False &&
              stream == c->stream && handle != Py_None && PyLong_AsVoidPtr(handle) == (void*)c->bfc;
  Py_XDECREF(closed);
  Py_XDECREF(stream);
  Py_XDECREF(executor_closed);
  Py_XDECREF(allocator);
  Py_XDECREF(handle);
  PyErr_Clear();
  if (fresh) {
    c->fresh_epoch = now;
  } else {
    c->stale = 1; /* for good: tensors.py makes a new one */
  }
  return fresh;
}

/* May this call take the C path at all? On success the copier is marked busy. */
static int copier_enter(CopierObject* c) {
  if (c->busy || pg_tracing() || !copier_fresh(c)) return 0;
  c->busy = 1;
  return 1;
}

/* The plugin's error in the status after `call`, raised as the executor words it. */
static void raise_plugin_error(CopierObject* c, int code, const char* call) {
  const char* message = pg_runtime.message(c->status);
  if (message == NULL) message = "";
  PyObject* text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
  pg_runtime.reset(c->status); /* plugins only ever set an error: the next call starts clean */
  if (text == NULL) return;
  PyObject* error = PyObject_CallMethod(c->executor, "_error", "iOs", code, text, call);
  Py_DECREF(text);
  if (error == NULL) return;
  PyErr_SetObject((PyObject*)Py_TYPE(error), error);
  Py_DECREF(error);
}

/* Records the copier's event on the stream; 0 and the error raised when the plugin refuses.
 * `*mark` is the stream's count of writes just before (see finish). */
static int record_event(CopierObject* c, uint64_t* mark) {
  *mark = c->ledger->issued;
  c->record(c->sp_device, c->sp_stream, c->sp_event, c->status);
  int code = pg_runtime.code(c->status);
  if (code == 0) return 1;
  raise_plugin_error(c, code, "SP_StreamExecutor.record_event");
  return 0;
}

/* After the copy was enqueued and the event recorded: done if the event completed, else
 * tensors._wait_for_stream waits for that event (and raises the stream's error). 0 with an
 * exception. Done, the writes the stream's ledger counted up to `mark` (taken before the
 * event) are known good. */
static int finish(CopierObject* c, PyObject* keep, PyObject* buffer, uint64_t mark) {
  if (c->event_status(c->sp_device, c->sp_event) == SE_EVENT_COMPLETE) {
    if (mark > c->ledger->good) c->ledger->good = mark;
    return 1;
  }
  /* Still busy while the wait runs Python code: other threads' copies take the Python path
   * meanwhile rather than share the copier's status. */
  PyObject* handle = PyLong_FromVoidPtr(c->sp_event);
  if (handle == NULL) return 0;
  PyObject* r = PyObject_CallFunctionObjArgs(c->wait, c->device, c->stream, keep,
                                             buffer ? buffer : Py_None, handle, NULL);
  Py_DECREF(handle);
  if (r == NULL) return 0;
  Py_DECREF(r);
  if (mark > c->ledger->good) c->ledger->good = mark;
  return 1;
}

static PyObject* copier_upload(CopierObject* c, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "upload(array, dtype)");
    return NULL;
  }
  PyObject *array = args[0], *dtype = args[1];
  if (c->skip_uploads > 0) {
    c->skip_uploads--;
    Py_RETURN_NONE;
  }
  if (!copier_enter(c)) Py_RETURN_NONE;
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();
    c->busy = 0;
    Py_RETURN_NONE;
  }
  PyObject* result = NULL;
  PyObject* buffer = NULL;
  PyObject* shape = NULL;
  if (view.len <= 0) goto fallback;
  /* Is the stream idle? Only then is copying from the caller's array and finding the copy
   * done a likely outcome; behind queued work the staging ring serves better. */
  uint64_t idle_mark = c->ledger->issued;
  c->record(c->sp_device, c->sp_stream, c->sp_event, c->status);
  if (pg_runtime.code(c->status) != 0) { /* the Python path records its own and reports */
    pg_runtime.reset(c->status);
    goto fallback;
  }
  if (c->event_status(c->sp_device, c->sp_event) != SE_EVENT_COMPLETE) {
    /* A plugin that never runs work at once finds its stream busy every time: after a few
     * misses in a row, the next uploads do not ask (each ask records an event). */
    if (++c->misses >= UPLOAD_MISSES) {
      c->misses = 0;
      c->skip_uploads = UPLOAD_SKIPS;
    }
    goto fallback;
  }
  if (idle_mark > c->ledger->good) c->ledger->good = idle_mark; /* all done, without error */
  c->misses = 0;
  uint64_t nbytes = (uint64_t)view.len;
  void* address = pg_runtime.bfc_allocate(c->bfc, nbytes);
  if (address == NULL) goto fallback; /* the Python path frees memory or reports it */
  buffer = pg_make_buffer(c->executor, (long long)nbytes, (unsigned long long)(uintptr_t)address,
                          c->bfc);
  if (buffer == NULL) goto fail; /* (the memory stays with the allocator) */
  shape = PyTuple_New(view.ndim);
  if (shape == NULL) goto fail;
  for (int i = 0; i < view.ndim; i++) {
    PyObject* n = PyLong_FromSsize_t(view.shape[i]);
    if (n == NULL) goto fail;
    PyTuple_SET_ITEM(shape, i, n);
  }
  SP_DeviceMemoryBase dst = {SP_DEVICE_MEMORY_BASE_STRUCT_SIZE, NULL, address, nbytes, 0};
  if (pg_keep_gil((long long)nbytes)) {
    c->htod(c->sp_device, c->sp_stream, &dst, view.buf, nbytes, c->status);
  } else {
    Py_BEGIN_ALLOW_THREADS
    c->htod(c->sp_device, c->sp_stream, &dst, view.buf, nbytes, c->status);
    Py_END_ALLOW_THREADS
  }
  int code = pg_runtime.code(c->status);
  if (code != 0) {
    raise_plugin_error(c, code, "SP_StreamExecutor.memcpy_htod");
    goto fail;
  }
  uint64_t mark;
  if (!record_event(c, &mark) || !finish(c, array, buffer, mark)) goto fail;
  Py_INCREF(buffer);
  result = pg_make_tensor(shape, dtype, c->device, buffer); /* steals the new reference */
  goto done;
fallback:
  result = Py_None;
  Py_INCREF(result);
  goto done;
fail:
  result = NULL;
done:
  c->busy = 0;
  Py_XDECREF(shape);
  Py_XDECREF(buffer); /* an upload that failed gives its memory back here */
  PyBuffer_Release(&view);
  return result;
}

static PyObject* copier_download(CopierObject* c, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "download(address, nbytes, out)");
    return NULL;
  }
  unsigned long long address = PyLong_AsUnsignedLongLong(args[0]);
  long long nbytes = PyLong_AsLongLong(args[1]);
  if (PyErr_Occurred()) return NULL;
  PyObject* out = args[2];
  if (nbytes <= 0 || address == 0 || !copier_enter(c)) Py_RETURN_FALSE;
  Py_buffer view;
  if (PyObject_GetBuffer(out, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
    PyErr_Clear();
    c->busy = 0;
    Py_RETURN_FALSE;
  }
  PyObject* result = NULL;
  if (view.len != nbytes) {
    result = Py_False;
    Py_INCREF(result);
  } else {
    SP_DeviceMemoryBase src = {SP_DEVICE_MEMORY_BASE_STRUCT_SIZE, NULL,
                               (void*)(uintptr_t)address, (uint64_t)nbytes, 0};
    if (pg_keep_gil(nbytes)) {
      c->dtoh(c->sp_device, c->sp_stream, view.buf, &src, (uint64_t)nbytes, c->status);
    } else {
      Py_BEGIN_ALLOW_THREADS
      c->dtoh(c->sp_device, c->sp_stream, view.buf, &src, (uint64_t)nbytes, c->status);
      Py_END_ALLOW_THREADS
    }
    int code = pg_runtime.code(c->status);
    uint64_t mark;
    if (code != 0) {
      raise_plugin_error(c, code, "SP_StreamExecutor.memcpy_dtoh");
    } else if (record_event(c, &mark) && finish(c, out, NULL, mark)) {
      result = Py_True;
      Py_INCREF(result);
    }
  }
  c->busy = 0;
  PyBuffer_Release(&view);
  return result;
}

static PyMethodDef copier_methods[] = {
    {"upload", (PyCFunction)(void (*)(void))copier_upload, METH_FASTCALL,
     "upload(array, dtype): a tensor holding a copy of the C-contiguous host array, or None "
     "when tensors.py should copy it its own way."},
    {"download", (PyCFunction)(void (*)(void))copier_download, METH_FASTCALL,
     "download(address, nbytes, out): copies nbytes of device memory at address into the "
     "C-contiguous host array out and waits for it; False when tensors.py should copy it its "
     "own way."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef copier_members[] = {
    {"device", T_OBJECT, offsetof(CopierObject, device), READONLY, "the device"},
    {"stream", T_OBJECT, offsetof(CopierObject, stream), READONLY,
     "the compute stream the copies run on"},
    {"stale", T_INT, offsetof(CopierObject, stale), READONLY,
     "true once the device closed or its compute stream or allocator changed"},
    {"skip_uploads", T_INT, offsetof(CopierObject, skip_uploads), READONLY,
     "uploads left to the Python path without asking whether the stream is idle"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject CopierType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.Copier",
    .tp_basicsize = sizeof(CopierObject),
    .tp_dealloc = (destructor)copier_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Copies between host arrays and one device's tensors on its compute stream.",
    .tp_traverse = (traverseproc)copier_traverse,
    .tp_clear = (inquiry)copier_clear,
    .tp_methods = copier_methods,
    .tp_members = copier_members,
    .tp_init = (initproc)copier_init,
    .tp_new = PyType_GenericNew,
};

int pg_copies_init(PyObject* module) {
  if (!(s_closed = PyUnicode_InternFromString("_closed")) ||
      !(s_compute_stream = PyUnicode_InternFromString("compute_stream")) ||
      !(s_allocator = PyUnicode_InternFromString("_allocator")) ||
      !(s_handle = PyUnicode_InternFromString("_handle"))) {
    return -1;
  }
  if (PyType_Ready(&CopierType) < 0) return -1;
  Py_INCREF(&CopierType);
  if (PyModule_AddObject(module, "Copier", (PyObject*)&CopierType) < 0) {
    Py_DECREF(&CopierType);
    return -1;
  }
  return 0;
}
