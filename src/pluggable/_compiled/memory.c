/* Device memory from a plugin's SP_StreamExecutor.allocate, called from C.
 *
 * Memory is the base of memory.DeviceMemory: a range of device memory kept as the
 * SP_DeviceMemoryBase itself. PluginAllocator holds one executor's SP_Device and its allocate
 * and deallocate callbacks; `allocate(executor, size, memory_space)` makes a DeviceMemory and
 * has the plugin fill the struct inside it (zeroed, with struct_size set: a fresh struct, as
 * TensorFlow passes one, so a plugin that fails without writing it hands back no address).
 * `close()` gives deallocate that same struct, exactly once: the GIL is held from the check
 * to the change of state, and released only around the plugin's call.
 *
 * An owning object dropped without close() does not call the plugin from its deallocation,
 * which may run inside the garbage collector (and the plugin may need a thread that waits for
 * the GIL): it queues the release with its executor, `_queue_release("deallocate", bytes of
 * the struct)`, which carries it out at its next safe point like those of streams and events.
 * Once the executor is closed, destroying the device freed everything: neither path calls the
 * plugin then. */
#include "compiled_internal.h" /* Python.h first */

#include <stdint.h>

#include "structmember.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

typedef void (*AllocateFn)(const SP_Device*, uint64_t, int64_t, SP_DeviceMemoryBase*);
typedef void (*DeallocateFn)(const SP_Device*, SP_DeviceMemoryBase*);

enum { UNOWNED, OWNING, FREED }; /* UNOWNED: a view, an empty allocation, unchecked memory */

typedef struct {
  PyObject_HEAD
  PyObject* executor;
  PyObject* owner;        /* a view's owning Memory, or None */
  PyObject* ctypes_pair;  /* `_struct`: None, or the ctypes struct copies pass, and its byref */
  PyObject* weakreflist;
  SP_DeviceMemoryBase base;
  const SP_Device* device; /* while OWNING: what deallocate takes */
  DeallocateFn deallocate;
  const void* platform;    /* while claimed: the plugin's allocate, its platform's key */
  int state;
  int claimed;             /* counted as live memory of the platform (pg_runtime.claim_memory) */
} MemoryObject;

/* Forgets the claim on the block before it goes back to the plugin. */
static void unclaim(MemoryObject* self) {
  if (self->claimed && pg_runtime.release_memory != NULL) {
    pg_runtime.release_memory(self->platform, self->base.opaque);
  }
  self->claimed = 0;
}

static PyTypeObject MemoryType;
static PyObject *s_closed, *s_queue_release, *s_deallocate, *s_is_closed;

/* The executor's `_closed` as 0 / 1, or -1 with an exception. */
static int executor_closed(PyObject* executor) {
  PyObject* closed = PyObject_GetAttr(executor, s_closed);
  if (closed == NULL) return -1;
  int result = PyObject_IsTrue(closed);
  Py_DECREF(closed);
  return result;
}

/* An owning object that is being destroyed: queue its release with the executor. Nothing can
 * be raised here; a failure to queue is reported as unraisable (the memory then stays
 * allocated until the device is closed). */
static void queue_release(MemoryObject* self) {
  if (self->state != OWNING || self->executor == NULL) return;
  self->state = FREED;
  unclaim(self);
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  int closed = executor_closed(self->executor);
  if (closed == 0) {
    PyObject* handle = PyBytes_FromStringAndSize((const char*)&self->base, sizeof self->base);
    PyObject* r = handle == NULL ? NULL : PyObject_CallMethodObjArgs(
                                              self->executor, s_queue_release, s_deallocate,
                                              handle, NULL);
    if (r == NULL) PyErr_WriteUnraisable(self->executor);
    Py_XDECREF(r);
    Py_XDECREF(handle);
  } else if (closed < 0) {
    PyErr_Clear(); /* an executor being torn down by the collector: its device went with it */
  }
  PyErr_Restore(type, value, traceback);
}

static void memory_dealloc(MemoryObject* self) {
  PyObject_GC_UnTrack(self);
  if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject*)self);
  queue_release(self);
  Py_CLEAR(self->executor);
  Py_CLEAR(self->owner);
  Py_CLEAR(self->ctypes_pair);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* No tp_clear: a Memory refers to its executor, its owner (a Memory) and a ctypes struct,
 * none of which refers back to it except through the executor, whose own clearing breaks any
 * such cycle; the executor stays set until the deallocation, which may need it. */
static int memory_traverse(MemoryObject* self, visitproc visit, void* arg) {
  Py_VISIT(self->executor);
  Py_VISIT(self->owner);
  Py_VISIT(self->ctypes_pair);
  return 0;
}

/* Memory(executor, address, size, payload=0, owner=None): memory this object does not own. */
static PyObject* memory_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* keywords[] = {"executor", "address", "size", "payload", "owner", NULL};
  PyObject *executor, *address, *size, *payload = NULL, *owner = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|OO:DeviceMemory", keywords, &executor,
                                   &address, &size, &payload, &owner)) {
    return NULL;
  }
  if (owner != Py_None && !PyObject_TypeCheck(owner, &MemoryType)) {
    PyErr_Format(PyExc_TypeError, "DeviceMemory: owner must be a DeviceMemory or None, not %s",
                 Py_TYPE(owner)->tp_name);
    return NULL;
  }
  unsigned long long fields[3] = {0, 0, 0};
  PyObject* values[3] = {address, size, payload};
  static const char* names[3] = {"address", "size", "payload"};
  for (int i = 0; i < 3; i++) {
    if (values[i] == NULL) continue;
    PyObject* number = PyNumber_Index(values[i]);
    if (number == NULL) {
      PyErr_Format(PyExc_TypeError, "DeviceMemory: %s must be an integer, not %s", names[i],
                   Py_TYPE(values[i])->tp_name);
      return NULL;
    }
    fields[i] = PyLong_AsUnsignedLongLong(number);
    Py_DECREF(number);
    if (fields[i] == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Format(PyExc_ValueError,
                   "DeviceMemory: %s must be an integer from 0 to 2**64 - 1, got %R", names[i],
                   values[i]);
      return NULL;
    }
  }
  MemoryObject* self = (MemoryObject*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  self->base.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  self->base.opaque = (void*)(uintptr_t)fields[0];
  self->base.size = fields[1];
  self->base.payload = fields[2];
  Py_INCREF(executor);
  self->executor = executor;
  Py_INCREF(owner);
  self->owner = owner;
  Py_INCREF(Py_None);
  self->ctypes_pair = Py_None;
  return (PyObject*)self;
}

static PyObject* memory_close(MemoryObject* self, PyObject* unused) {
  (void)unused;
  if (self->state != OWNING) Py_RETURN_NONE;
  int closed = executor_closed(self->executor);
  if (closed < 0) return NULL;
  if (self->state != OWNING) Py_RETURN_NONE; /* reading `_closed` may have run other code */
  self->state = FREED;
  unclaim(self);
  if (!closed) {
    Py_BEGIN_ALLOW_THREADS
    self->deallocate(self->device, &self->base);
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

static PyObject* memory_address(MemoryObject* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->base.opaque);
}

static PyObject* memory_size(MemoryObject* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->base.size);
}

static PyObject* memory_payload(MemoryObject* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong(self->base.payload);
}

static PyObject* memory_is_closed(MemoryObject* self, void* closure) {
  (void)closure;
  if (self->owner != NULL && self->owner != Py_None) {
    return PyObject_GetAttr(self->owner, s_is_closed);
  }
  return PyBool_FromLong(self->state == FREED);
}

static PyMethodDef memory_methods[] = {
    {"close", (PyCFunction)memory_close, METH_NOARGS,
     "Returns the memory to the device now (a no-op for views and closed memory)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef memory_getset[] = {
    {"address", (getter)memory_address, NULL,
     "The plugin's opaque pointer, as an integer (0 for an empty allocation).", NULL},
    {"size", (getter)memory_size, NULL, "Bytes.", NULL},
    {"payload", (getter)memory_payload, NULL, "The plugin's own value for the range.", NULL},
    {"is_closed", (getter)memory_is_closed, NULL,
     "Whether the memory (a view's owner's, for a view) was given back.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef memory_members[] = {
    {"executor", T_OBJECT, offsetof(MemoryObject, executor), READONLY,
     "the StreamExecutor the memory belongs to"},
    {"_owner", T_OBJECT, offsetof(MemoryObject, owner), READONLY,
     "a view's owning memory, or None"},
    {"_struct", T_OBJECT, offsetof(MemoryObject, ctypes_pair), 0,
     "None, or the SP_DeviceMemoryBase copies pass and its byref, once made"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject MemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.Memory",
    .tp_basicsize = sizeof(MemoryObject),
    .tp_dealloc = (destructor)memory_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Device memory as an SP_DeviceMemoryBase; given back by close().",
    .tp_traverse = (traverseproc)memory_traverse,
    .tp_weaklistoffset = offsetof(MemoryObject, weakreflist),
    .tp_methods = memory_methods,
    .tp_members = memory_members,
    .tp_getset = memory_getset,
    .tp_new = memory_new,
};

/* ---- PluginAllocator ---------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  PyTypeObject* memory_type; /* memory.DeviceMemory */
  PyObject* check_arguments; /* (size, memory_space) -> the same as ints, or raises */
  const SP_Device* device;
  AllocateFn allocate;
  DeallocateFn deallocate;
} PluginAllocatorObject;

static void allocator_dealloc(PluginAllocatorObject* self) {
  Py_CLEAR(self->memory_type);
  Py_CLEAR(self->check_arguments);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* The address an integer gives, or NULL with an exception naming `what`. */
static void* address_of(PyObject* value, const char* what) {
  void* p = PyLong_Check(value) ? PyLong_AsVoidPtr(value) : NULL;
  if (p == NULL && !PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "PluginAllocator: %s must be a non-zero address", what);
  }
  return p;
}

/* PluginAllocator(memory_type, check_arguments, device, allocate, deallocate): the class of
 * the memory it makes, the Python function that checks arguments that are not plain integers
 * in range (and raises the error that says what is wrong), and the addresses of an executor's
 * SP_Device and of its SP_StreamExecutor's allocate and deallocate. */
static PyObject* allocator_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *memory_type, *check_arguments, *device, *allocate, *deallocate;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "PluginAllocator takes no keyword arguments");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "O!OOOO:PluginAllocator", &PyType_Type, &memory_type,
                        &check_arguments, &device, &allocate, &deallocate)) {
    return NULL;
  }
  if (!PyCallable_Check(check_arguments)) {
    PyErr_SetString(PyExc_TypeError, "PluginAllocator: check_arguments must be callable");
    return NULL;
  }
  if (!PyType_IsSubtype((PyTypeObject*)memory_type, &MemoryType)) {
    PyErr_SetString(PyExc_TypeError, "PluginAllocator: memory_type must subclass Memory");
    return NULL;
  }
  const SP_Device* device_p = address_of(device, "device");
  void* allocate_p = device_p ? address_of(allocate, "allocate") : NULL;
  void* deallocate_p = allocate_p ? address_of(deallocate, "deallocate") : NULL;
  if (deallocate_p == NULL) return NULL;
  PluginAllocatorObject* self = (PluginAllocatorObject*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  Py_INCREF(memory_type);
  self->memory_type = (PyTypeObject*)memory_type;
  Py_INCREF(check_arguments);
  self->check_arguments = check_arguments;
  self->device = device_p;
  /* Function pointers arrive as integers from ctypes: converting through uintptr_t is what
   * the platform's ABI makes exact. */
  self->allocate = (AllocateFn)(uintptr_t)allocate_p;
  self->deallocate = (DeallocateFn)(uintptr_t)deallocate_p;
  return (PyObject*)self;
}

/* A size below 2**63 and an int64 memory space from plain integers; 0 when they are not (no
 * exception set). */
static int plain_arguments(PyObject* size, PyObject* memory_space, uint64_t* size_out,
                           int64_t* memory_space_out) {
  if (!PyLong_CheckExact(size) || !PyLong_CheckExact(memory_space)) return 0;
  int overflow;
  long long n = PyLong_AsLongLongAndOverflow(size, &overflow);
  if (overflow || n < 0) return 0;
  long long space = PyLong_AsLongLongAndOverflow(memory_space, &overflow);
  if (overflow) return 0;
  *size_out = (uint64_t)n;
  *memory_space_out = (int64_t)space;
  return 1;
}

/* allocate(executor, size, memory_space): the plugin's allocation as an owning DeviceMemory;
 * for size 0 without an address, a DeviceMemory that owns nothing; None when the plugin gave
 * no memory for a non-zero size. The caller has checked that the executor is open. */
static PyObject* allocator_allocate(PluginAllocatorObject* self, PyObject* const* args,
                                    Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "allocate(executor, size, memory_space)");
    return NULL;
  }
  uint64_t size;
  int64_t memory_space;
  if (!plain_arguments(args[1], args[2], &size, &memory_space)) {
    PyObject* checked = PyObject_CallFunctionObjArgs(self->check_arguments, args[1], args[2],
                                                     NULL);
    if (checked == NULL) return NULL;
    int plain = PyTuple_Check(checked) && PyTuple_GET_SIZE(checked) == 2 &&
                plain_arguments(PyTuple_GET_ITEM(checked, 0), PyTuple_GET_ITEM(checked, 1),
                                &size, &memory_space);
    Py_DECREF(checked);
    if (!plain) {
      PyErr_SetString(PyExc_TypeError,
                      "allocate: check_arguments must return (size, memory_space) as integers "
                      "in range");
      return NULL;
    }
  }
  MemoryObject* memory = (MemoryObject*)self->memory_type->tp_alloc(self->memory_type, 0);
  if (memory == NULL) return NULL;
  Py_INCREF(args[0]);
  memory->executor = args[0];
  Py_INCREF(Py_None);
  memory->owner = Py_None;
  Py_INCREF(Py_None);
  memory->ctypes_pair = Py_None;
  memory->base.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  Py_BEGIN_ALLOW_THREADS
  self->allocate(self->device, size, memory_space, &memory->base);
  Py_END_ALLOW_THREADS
  if (memory->base.opaque != NULL && size != 0 && pg_runtime.claim_memory != NULL) {
    /* The checks the BFC makes of its regions: size, alignment, no overlap with live memory
     * of the platform. A refused block is not used. */
    char why[480];
    int claimed = pg_runtime.claim_memory((const void*)(uintptr_t)self->allocate,
                                          &memory->base, size, why, sizeof why);
    if (claimed != 1) {
      if (claimed == 0) {
        Py_BEGIN_ALLOW_THREADS
        self->deallocate(self->device, &memory->base);
        Py_END_ALLOW_THREADS
      }
      Py_DECREF(memory);
      PyErr_SetString(pg_internal_error != NULL ? pg_internal_error : PyExc_RuntimeError, why);
      return NULL;
    }
    memory->claimed = 1;
    memory->platform = (const void*)(uintptr_t)self->allocate;
  }
  if (memory->base.opaque != NULL) {
    memory->device = self->device;
    memory->deallocate = self->deallocate;
    memory->state = OWNING;
  } else if (size != 0) {
    Py_DECREF(memory);
    Py_RETURN_NONE;
  }
  return (PyObject*)memory;
}

static PyMethodDef allocator_methods[] = {
    {"allocate", (PyCFunction)(void (*)(void))allocator_allocate, METH_FASTCALL,
     "allocate(executor, size, memory_space) -> DeviceMemory, or None when the plugin gave "
     "no memory"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject PluginAllocatorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.PluginAllocator",
    .tp_basicsize = sizeof(PluginAllocatorObject),
    .tp_dealloc = (destructor)allocator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An executor's SP_StreamExecutor.allocate and deallocate, called from C.",
    .tp_methods = allocator_methods,
    .tp_new = allocator_new,
};

int pg_memory_init(PyObject* module) {
  if ((s_closed = PyUnicode_InternFromString("_closed")) == NULL ||
      (s_queue_release = PyUnicode_InternFromString("_queue_release")) == NULL ||
      (s_deallocate = PyUnicode_InternFromString("deallocate")) == NULL ||
      (s_is_closed = PyUnicode_InternFromString("is_closed")) == NULL) {
    return -1;
  }
  if (PyType_Ready(&MemoryType) < 0 || PyType_Ready(&PluginAllocatorType) < 0) return -1;
  Py_INCREF(&MemoryType);
  if (PyModule_AddObject(module, "Memory", (PyObject*)&MemoryType) < 0) {
    Py_DECREF(&MemoryType);
    return -1;
  }
  Py_INCREF(&PluginAllocatorType);
  if (PyModule_AddObject(module, "PluginAllocator", (PyObject*)&PluginAllocatorType) < 0) {
    Py_DECREF(&PluginAllocatorType);
    return -1;
  }
  return 0;
}
