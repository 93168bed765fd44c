/* The per-op path in C: dispatch's remembered plans, the device buffers of tensors, and the
 * host tracer's per-op and per-free records.
 *
 * An op the host has run before with the same op name, device scope and input types, shapes
 * and devices has a Plan (dispatch._Plan subclasses it): the kernel instance, a request for
 * the runtime's pluggable_KernelRun with everything but the input addresses filled in, and
 * the output shapes and dtypes. `execute(op_name, inputs)` finds the plan, checks it is not
 * stale, fills in the input addresses, runs the kernel, and builds the output tensors: one
 * call from Python, no Python code on the way. It returns None when there is no usable plan;
 * dispatch then takes its slow path, which leaves a plan behind.
 *
 * A plan's run checks no output size: the slow path made the plan only after the outputs'
 * bytes passed its check against the device's memory limit (dispatch._check_output_sizes),
 * and neither the plan's outputs nor that limit (fixed for the allocator's life; a new
 * allocator makes the plan stale) change afterwards.
 *
 * The GIL during the kernel run: released when the run's inputs and outputs together exceed
 * hold_gil_bytes (HOLD_GIL_BYTES unless changed with `hold_gil_bytes(n)`), or while a Python
 * host callback is pending (hostcall.c); kept otherwise.
 * A small run is over in about a microsecond, less than giving the GIL away costs: with a
 * second Python thread waiting for it, each release wakes that thread (a futex call), which
 * takes the GIL, and the two then hand it back and forth once per op. Kept, the GIL goes to
 * the other thread only at the interpreter's switch interval, as with NumPy's small loops.
 * A plugin kernel may wait for its stream; the only work queued there that needs the GIL is
 * a Python host callback, and runs are released while one is pending. A small run that does
 * wait (a launch-blocking plugin behind a long queue) keeps other Python threads waiting as
 * long; a large run always lets them go on.
 *
 * Buffer is the base of tensors.DeviceBuffer: device memory from a device's BFC allocator.
 * Dropping the last reference gives the memory back from C (no finalizer call); a buffer that
 * asynchronous work on another stream still uses goes to the Python release function bound
 * by tensors.py, which waits for that work through the event manager.
 *
 * Tensors are tensors.Tensor objects (a Python class with __slots__): made here with the
 * type's own allocator and their slots written at the offsets of the class's member
 * descriptors, which is what Tensor.__init__ would store. An output a kernel keeps in host
 * memory (its registration's HostMemory) is the exception: the function bound with
 * `bind_host_outputs` (dispatch's) makes its tensor.
 *
 * While a profiling session runs (`set_tracer`), every op run here and every buffer freed
 * here is recorded in C; `take_records` hands them over as the same tuples as
 * profiler/host_tracer.py's hooks make: OP (0, thread, start_ns, end_ns, op_name, plan, fresh
 * outputs) and FREE (3, thread, when_ns, allocator, bytes), with CLOCK_REALTIME stamps. */
#include "compiled_internal.h" /* Python.h first */
#include "pluggable/profiler_clock.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "runtime_internal.h"
#include "structmember.h"

/* ---- what bind() gives -------------------------------------------------------------------- */

static int (*kernel_run)(const int64_t*);
static int (*bfc_deallocate)(PG_BFC*, void*);

static PyTypeObject* tensor_type;       /* tensors.Tensor */
static PyTypeObject* buffer_type;       /* tensors.DeviceBuffer, a subclass of Buffer */
static PyTypeObject* dtype_type;        /* dtypes.DType */
static PyObject* release_function;      /* tensors._release_buffer(executor, address, uses) */
static PyObject* lost_function;         /* tensors._raise_lost(tensor): raises DataLossError */
static PyObject* plans;                 /* dispatch._plans */
static PyObject* settings;              /* dispatch._settings */
static PyObject* scope_var;             /* tensors.device_scope (a ContextVar) */
static PyObject* pending_deletes;       /* the kernel registry's instances awaiting delete */
static PyObject* flush_releases;        /* what deletes them */
static PyObject* kernels_module;        /* pluggable.kernels.registry (its `generation`) */
static PyObject* slow_execute;          /* dispatch._missed, for calls without a plan */
static PyObject* host_output_function;  /* dispatch._host_output(plan, address, nbytes, dtype,
                                          shape, owned, aliased_input) -> Tensor */
static PyObject* free_host_function;    /* kernels.registry.free_host_output(address) */

/* Slot offsets of Tensor and DType (from their member descriptors). */
static Py_ssize_t off_shape, off_dtype, off_device, off_array, off_buffer, off_ready, off_code;

/* The running session's host tracer, or NULL. */
static PyObject* tracer_names;          /* HostTracer.thread_names (a dict) */
static PyObject* tracer_ident;          /* HostTracer._ident (names the calling thread) */
static PyObject* tracer;                /* the HostTracer itself */


/* Bumped by `invalidate()` whenever a plan or a buffer could go stale: a device closed or its
 * streams replaced, the enabled kernels changed, a kernel instance or an allocator closed.
 * What was checked at the current epoch needs no check again. Callers change the state
 * first and invalidate after (and free what went stale only then), so that a check made in
 * between, which saw the old state, is made again. */
static unsigned long long epoch = 1;

static int set_ref(PyObject** target, PyObject* value);

static PyObject *s_allocator, *s_closed, *s_handle, *s_deallocate_failed, *s_compute_stream,
    *s_generation, *s_event, *s_make_wait, *s_error, *s_general, *s_kernel, *s_executor,
    *s_template, *s_slots, *s_n_out, *s_tf_code, *s_name;

#define SLOT(obj, off) (*(PyObject**)((char*)(obj) + (off)))

/* A run whose inputs and outputs add up to at most this many bytes keeps the GIL (unless a
 * host callback is pending): an elementwise kernel over 16 KiB, or a product of 32x32
 * matrices, run in place, takes microseconds. The default of hold_gil_bytes; -1 releases it
 * for every run (what benchmarks compare with). */
#define HOLD_GIL_BYTES (16 * 1024)
static long long hold_gil_bytes = HOLD_GIL_BYTES;

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The records' clock (pluggable/profiler_clock.h): ticks of the time-stamp counter where the
 * kernel keeps time with it, else CLOCK_REALTIME nanoseconds; decided by the first session,
 * then fixed. The session's start pair, and the stop pair once it stopped, turn ticks into
 * CLOCK_REALTIME nanoseconds when the records become tuples. */
static int clock_tsc = -1;
static PG_ClockPair clock_start, clock_stop;

static uint64_t now_ticks(void) { return pg_profiler_ticks(clock_tsc > 0, realtime_ns); }
/* ---- Buffer ------------------------------------------------------------------------------- */

typedef struct {
  PyObject_HEAD
  PyObject* executor;
  unsigned long long address;
  long long nbytes;
  PyObject* uses;
  PyObject* weakreflist;
  PG_BFC* bfc;                  /* the allocator's handle, when known at `bfc_epoch` */
  unsigned long long bfc_epoch;
  PgLedger* ledger; /* the ledger of the stream whose work last wrote it (ledger.c), or NULL */
  uint64_t stamp;   /* that write's count in the ledger */
} BufferObject;

static PyTypeObject BufferType;

/* ---- the host tracer's records ----------------------------------------------------------
 * Kept in C while the session runs, in chunks that are never moved: a record costs no Python
 * object (the collector would visit every one of them, again and again, as the session
 * grows). `take_records` turns them into host_tracer.py's tuples when the session stops.
 * Records the Python hooks make (copies, allocations, annotations, slow-path ops) are stored
 * here too, as their tuples, so that all keep the order they were made in. */
enum { RECORD_OBJECT = -1 }; /* besides compiled_internal.h's REC_ kinds: a Python tuple */

typedef struct {
  int kind;            /* REC_OP, REC_FREE or RECORD_OBJECT */
  unsigned long ident; /* the thread */
  uint64_t t0, t1;     /* OP: start and end; FREE: when (clock ticks) */
  PyObject* a;         /* OP: the op name; FREE: the executor; OBJECT: the tuple */
  PyObject* b;         /* OP: the plan (NULL: the run failed) */
  PyObject* c;         /* OP: the fresh outputs (NULL: none) */
  long long n;         /* FREE: bytes; OP: the launch's correlation id */
} Record;

#define RECORDS_PER_CHUNK 1024
typedef struct Chunk {
  struct Chunk* next;
  size_t used;
  Record records[RECORDS_PER_CHUNK];
} Chunk;

static Chunk* first_chunk;
static Chunk* last_chunk;
static unsigned long long records_lost; /* no memory for a chunk */
/* Chunks of earlier sessions, kept for the next one (at most SPARE_CHUNKS, 2 MiB): memory
 * that is new to the process costs a page fault per 4 KiB written, about a tenth of what
 * recording an op costs otherwise. */
#define SPARE_CHUNKS 32
static Chunk* spare_chunks;
static int spare_count;

/* A free record slot, or NULL when there is no memory (the record is lost and counted). */
static Record* new_record(void) {
  if (last_chunk == NULL || last_chunk->used == RECORDS_PER_CHUNK) {
    Chunk* chunk = spare_chunks;
    if (chunk != NULL) {
      spare_chunks = chunk->next;
      spare_count--;
    } else {
      chunk = PyMem_RawMalloc(sizeof(Chunk));
    }
    if (chunk == NULL) {
      records_lost++;
      return NULL;
    }
    chunk->next = NULL;
    chunk->used = 0;
    if (last_chunk != NULL) last_chunk->next = chunk;
    else first_chunk = chunk;
    last_chunk = chunk;
  }
  return &last_chunk->records[last_chunk->used++];
}

static void release_record(Record* r) {
  Py_XDECREF(r->a);
  Py_XDECREF(r->b);
  Py_XDECREF(r->c);
}

static void clear_records(void) {
  while (first_chunk != NULL) {
    Chunk* next = first_chunk->next;
    for (size_t i = 0; i < first_chunk->used; i++) release_record(&first_chunk->records[i]);
    if (spare_count < SPARE_CHUNKS) {
      first_chunk->next = spare_chunks;
      spare_chunks = first_chunk;
      spare_count++;
    } else {
      PyMem_RawFree(first_chunk);
    }
    first_chunk = next;
  }
  last_chunk = NULL;
  records_lost = 0;
}

/* The calling thread's ident. While a session runs, a thread seen for the first time is named
 * in the tracer's thread_names (HostTracer._ident); the last thread seen is remembered, one
 * thread issuing ops being the common case. */
static unsigned long cached_ident;
static int cached_ident_known;

static unsigned long thread_ident(void) {
  unsigned long ident = PyThread_get_thread_ident();
  if (cached_ident_known && ident == cached_ident) return ident;
  PyObject* key = PyLong_FromUnsignedLong(ident);
  int known = key != NULL ? PyDict_Contains(tracer_names, key) : -1;
  Py_XDECREF(key);
  if (known == 0) {
    PyObject* r = PyObject_CallNoArgs(tracer_ident);
    known = r == NULL ? -1 : 1;
    Py_XDECREF(r);
  }
  if (known < 0) {
    PyErr_Clear(); /* the line is named "thread <ident>" instead */
  } else {
    cached_ident = ident;
    cached_ident_known = 1;
  }
  return ident;
}

static PyObject* new_ref(PyObject* o) {
  Py_INCREF(o);
  return o;
}

/* Records a FREE of `nbytes` given back to `executor`'s device allocator. */
static void record_free(PyObject* executor, long long nbytes) {
  uint64_t when = now_ticks();
  Record* r = new_record();
  if (r == NULL) return;
  r->kind = REC_FREE;
  r->ident = thread_ident();
  r->t0 = when;
  r->t1 = 0;
  r->a = new_ref(executor);
  r->b = r->c = NULL;
  r->n = nbytes;
}

/* The BFC allocator `self`'s memory goes back to: the one its plan's run took it from while
 * nothing was closed since, else the executor's, looked up; NULL once either is closed. */
static PG_BFC* live_bfc(BufferObject* self) {
  if (self->bfc != NULL && self->bfc_epoch == epoch) return self->bfc;
  PG_BFC* bfc = NULL;
  PyObject* allocator = PyObject_GetAttr(self->executor, s_allocator);
  PyObject* closed = allocator ? PyObject_GetAttr(self->executor, s_closed) : NULL;
  if (allocator != NULL && closed == Py_False && allocator != Py_None) {
    PyObject* handle = PyObject_GetAttr(allocator, s_handle);
    if (handle != NULL && handle != Py_None) bfc = (PG_BFC*)PyLong_AsVoidPtr(handle);
    Py_XDECREF(handle);
  }
  Py_XDECREF(allocator);
  Py_XDECREF(closed);
  return bfc;
}

/* Gives the buffer's memory back: straight to the BFC allocator when no other stream's work
 * uses it, else through the Python release function. Errors cannot propagate from a
 * deallocation: they are dropped, as a __del__'s would be (the memory then stays with the
 * allocator until the executor closes). */
static void buffer_release(BufferObject* self) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  void* address = (void*)(uintptr_t)self->address;
  self->address = 0;
  int uses = self->uses != NULL && self->uses != Py_None && PyObject_IsTrue(self->uses) == 1;
  if (self->executor == NULL) {
    /* cleared by the collector: nothing to give the memory back to */
  } else if (uses || bfc_deallocate == NULL) {
    PyObject* r = release_function == NULL ? NULL :
        PyObject_CallFunction(release_function, "OKO", self->executor,
                              (unsigned long long)(uintptr_t)address,
                              self->uses ? self->uses : Py_None);
    Py_XDECREF(r);
  } else {
    PG_BFC* bfc = live_bfc(self);
    if (bfc != NULL) {
      if (tracer != NULL) record_free(self->executor, self->nbytes);
      if (bfc_deallocate(bfc, address) != 0) { /* not a live allocation: the allocator says so */
        PyObject* allocator = PyObject_GetAttr(self->executor, s_allocator);
        PyObject* where = PyLong_FromVoidPtr(address);
        PyObject* r = allocator && where ? PyObject_CallMethodObjArgs(
                                               allocator, s_deallocate_failed, where, NULL)
                                         : NULL;
        Py_XDECREF(r);
        Py_XDECREF(where);
        Py_XDECREF(allocator);
      }
    }
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
}

static void buffer_dealloc(BufferObject* self) {
  PyObject_GC_UnTrack(self);
  if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject*)self);
  if (self->address) buffer_release(self);
  Py_CLEAR(self->executor);
  Py_CLEAR(self->uses);
  Py_CLEAR(self->ledger);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static int buffer_traverse(BufferObject* self, visitproc visit, void* arg) {
  Py_VISIT(self->executor);
  Py_VISIT(self->uses);
  return 0;
}

static int buffer_clear(BufferObject* self) {
  Py_CLEAR(self->executor);
  Py_CLEAR(self->uses);
  return 0;
}

static PyObject* buffer_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)args;
  (void)kwargs;
  BufferObject* self = (BufferObject*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  Py_INCREF(Py_None);
  self->executor = Py_None;
  Py_INCREF(Py_None);
  self->uses = Py_None;
  return (PyObject*)self;
}

void pg_buffer_stamp(PyObject* buffer, PgLedger* ledger) {
  BufferObject* b = (BufferObject*)buffer;
  Py_INCREF(ledger);
  Py_XSETREF(b->ledger, ledger);
  b->stamp = ++ledger->issued;
}

static PyObject* buffer_stamp(BufferObject* self, PyObject* ledger) {
  if (!PyObject_TypeCheck(ledger, &PgLedgerType)) {
    PyErr_SetString(PyExc_TypeError, "stamp(ledger): a pluggable._compiled.Ledger (a stream's _ledger)");
    return NULL;
  }
  pg_buffer_stamp((PyObject*)self, (PgLedger*)ledger);
  Py_RETURN_NONE;
}

static PyObject* buffer_lost(BufferObject* self, void* closure) {
  (void)closure;
  if (!pg_ledger_lost(self->ledger, self->stamp)) Py_RETURN_NONE;
  Py_INCREF(self->ledger->failure);
  return self->ledger->failure;
}

static PyMethodDef buffer_methods[] = {
    {"stamp", (PyCFunction)buffer_stamp, METH_O,
     "stamp(ledger): the memory is written by work just enqueued on the ledger's stream."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef buffer_getset[] = {
    {"lost", (getter)buffer_lost, NULL,
     "None, or the failure (a str) of the stream work that was to write the memory and did "
     "not: its bytes are not the value they were to hold",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef buffer_members[] = {
    {"executor", T_OBJECT, offsetof(BufferObject, executor), 0,
     "the StreamExecutor whose allocator the memory came from"},
    {"address", T_ULONGLONG, offsetof(BufferObject, address), 0,
     "the device address (0 once given back, or for an empty buffer)"},
    {"nbytes", T_LONGLONG, offsetof(BufferObject, nbytes), 0, "bytes requested"},
    {"uses", T_OBJECT, offsetof(BufferObject, uses), 0,
     "markers of work on other streams that uses the memory, or None"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Device memory from a device's allocator, given back when dropped.",
    .tp_traverse = (traverseproc)buffer_traverse,
    .tp_clear = (inquiry)buffer_clear,
    .tp_weaklistoffset = offsetof(BufferObject, weakreflist),
    .tp_members = buffer_members,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
    .tp_new = buffer_new,
};

/* A new DeviceBuffer over `address` (owned), from the allocator `bfc`, without running its
 * __init__. */
static PyObject* make_buffer(PyObject* executor, long long nbytes, uint64_t address, PG_BFC* bfc) {
  BufferObject* b = (BufferObject*)buffer_type->tp_alloc(buffer_type, 0);
  if (b == NULL) return NULL;
  b->bfc = bfc;
  b->bfc_epoch = epoch;
  Py_INCREF(executor);
  b->executor = executor;
  b->nbytes = nbytes;
  b->address = address;
  Py_INCREF(Py_None);
  b->uses = Py_None;
  return (PyObject*)b;
}

/* A new Tensor, as Tensor(shape, dtype, device, None, buffer, None) would be. Steals
 * `buffer`. */
static PyObject* make_tensor(PyObject* shape, PyObject* dtype, PyObject* device, PyObject* buffer) {
  PyObject* t = tensor_type->tp_alloc(tensor_type, 0);
  if (t == NULL) {
    Py_DECREF(buffer);
    return NULL;
  }
  Py_INCREF(shape);
  SLOT(t, off_shape) = shape;
  Py_INCREF(dtype);
  SLOT(t, off_dtype) = dtype;
  Py_INCREF(device);
  SLOT(t, off_device) = device;
  Py_INCREF(Py_None);
  SLOT(t, off_array) = Py_None;
  SLOT(t, off_buffer) = buffer;
  Py_INCREF(Py_None);
  SLOT(t, off_ready) = Py_None;
  return t;
}

PgRuntime pg_runtime;
int pg_keep_gil(long long bytes) { return bytes <= hold_gil_bytes && !pg_host_callbacks_pending(); }
unsigned long long pg_epoch(void) { return epoch; }
int pg_tracing(void) { return tracer != NULL; }
PyTypeObject* pg_tensor_type(void) { return tensor_type; }
PyObject* pg_make_buffer(PyObject* executor, long long nbytes, unsigned long long address,
                         PG_BFC* bfc) {
  return make_buffer(executor, nbytes, address, bfc);
}
PyObject* pg_make_tensor(PyObject* shape, PyObject* dtype, PyObject* device, PyObject* buffer) {
  return make_tensor(shape, dtype, device, buffer);
}

/* ---- Plan --------------------------------------------------------------------------------- */

typedef struct {
  PyObject* shape;
  PyObject* dtype;
  long long nbytes;
  long long code; /* the dtype's TF_DataType */
} OutputSpec;

typedef struct {
  PyObject_HEAD
  PyObject* device;
  PyObject* compute;
  PgLedger* ledger; /* the compute stream's (ledger.c): the outputs' stamps */
  PyObject* prepared;
  PyObject* kernel;
  PyObject* executor;
  PyObject* outputs; /* the Python tuple of (shape, dtype, nbytes) */
  PyObject* fresh_one; /* ((executor, nbytes),): the host tracer's record of a fresh output */
  long long generation;
  OutputSpec* specs;
  Py_ssize_t n_out;
  int64_t* template_words;
  Py_ssize_t n_words;
  Py_ssize_t* slots;
  Py_ssize_t n_slots;
  /* Per input of the request, its index among the device inputs (`slots`), or -1 for a
   * host-memory constant: how a forwarded input's buffer is found. */
  Py_ssize_t* input_slot;
  Py_ssize_t n_inputs;
  Py_ssize_t out_words;
  /* The plan's own request, output records and status, used by one run at a time. */
  int64_t* request;
  int64_t* out;
  TF_Status* status;
  int busy;
  long long run_bytes; /* of its inputs and outputs (LLONG_MAX when the template does not say) */
  unsigned long long fresh_epoch; /* the epoch at which it was last found fresh */
} PlanObject;

/* The allocator the plan's outputs come from. */
static PG_BFC* plan_bfc(const PlanObject* p) {
  return (PG_BFC*)(intptr_t)p->template_words[PG_RUN_ALLOCATOR];
}

static PyTypeObject PlanType;

static void plan_free_buffers(PlanObject* p) {
  PyMem_Free(p->specs);
  PyMem_Free(p->template_words);
  PyMem_Free(p->slots);
  PyMem_Free(p->input_slot);
  p->input_slot = NULL;
  PyMem_Free(p->request);
  PyMem_Free(p->out);
  p->specs = NULL;
  p->template_words = p->request = p->out = NULL;
  p->slots = NULL;
  if (p->status != NULL && pg_runtime.delete_status != NULL) {
    pg_runtime.delete_status(p->status);
  }
  p->status = NULL;
}

static int plan_clear(PlanObject* p) {
  for (Py_ssize_t i = 0; p->specs != NULL && i < p->n_out; i++) {
    Py_CLEAR(p->specs[i].shape);
    Py_CLEAR(p->specs[i].dtype);
  }
  Py_CLEAR(p->device);
  Py_CLEAR(p->compute);
  Py_CLEAR(p->ledger);
  Py_CLEAR(p->prepared);
  Py_CLEAR(p->kernel);
  Py_CLEAR(p->executor);
  Py_CLEAR(p->outputs);
  Py_CLEAR(p->fresh_one);
  return 0;
}

static int plan_traverse(PlanObject* p, visitproc visit, void* arg) {
  for (Py_ssize_t i = 0; p->specs != NULL && i < p->n_out; i++) {
    Py_VISIT(p->specs[i].shape);
    Py_VISIT(p->specs[i].dtype);
  }
  Py_VISIT(p->device);
  Py_VISIT(p->compute);
  Py_VISIT(p->prepared);
  Py_VISIT(p->kernel);
  Py_VISIT(p->executor);
  Py_VISIT(p->outputs);
  Py_VISIT(p->fresh_one);
  return 0;
}

static void plan_dealloc(PlanObject* p) {
  PyObject_GC_UnTrack(p);
  plan_clear(p);
  plan_free_buffers(p);
  Py_TYPE(p)->tp_free((PyObject*)p);
}

/* The bytes of the plan's inputs and outputs (-1 for a template that does not say, and for a
 * run that must not keep the GIL). */
static long long run_bytes(const PlanObject* p) {
  const int64_t* w = p->template_words;
  int64_t n_in = w[PG_RUN_NUM_INPUTS], n_out = w[PG_RUN_NUM_OUTPUTS];
  if (n_in < 0 || n_out < 0 || n_out > p->n_words) return -1;
  long long total = 0;
  for (Py_ssize_t i = 0; i < p->n_out; i++) {
    if (p->specs[i].nbytes < 0) return -1; /* decided by the run */
    total += p->specs[i].nbytes;
  }
  Py_ssize_t at = PG_RUN_HEADER_WORDS + (Py_ssize_t)n_out;
  for (int64_t i = 0; i < n_in; i++) {
    if (at + 5 > p->n_words || w[at + 1] < 0 || w[at + 4] < 0) return -1;
    /* A variable's kernel takes the variable's lock (kernels_experimental.h), which a thread
     * waiting for the GIL may hold: its run always lets go of the GIL. */
    if (w[at + 2] == TF_RESOURCE) return -1;
    total += w[at + 1];
    at += 5 + (Py_ssize_t)w[at + 4];
  }
  return total;
}

/* Plan(device, prepared, outputs, generation): `prepared` is a kernels.PreparedRun,
 * `outputs` a sequence of (shape tuple, DType, nbytes). */
static int plan_init(PlanObject* p, PyObject* args, PyObject* kwargs) {
  static char* names[] = {"device", "prepared", "outputs", "generation", NULL};
  PyObject *device, *prepared, *outputs;
  long long generation;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOL:Plan", names, &device, &prepared,
                                   &outputs, &generation)) {
    return -1;
  }
  if (kernel_run == NULL || tensor_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "pluggable._compiled is not bound to the runtime library");
    return -1;
  }
  if (kernels_module == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "pluggable._compiled is not bound to the kernel registry");
    return -1;
  }
  plan_clear(p);
  p->fresh_epoch = 0;
  plan_free_buffers(p);
  PyObject* template_obj = NULL;
  PyObject* slots_obj = NULL;
  PyObject* n_out_obj = NULL;
  PyObject* specs = NULL;
  Py_buffer view = {0};
  int ok = -1;
  Py_INCREF(device);
  p->device = device;
  Py_INCREF(prepared);
  p->prepared = prepared;
  p->generation = generation;
  if ((p->compute = PyObject_GetAttr(device, s_compute_stream)) == NULL) goto done;
  if ((p->ledger = pg_stream_ledger(p->compute, "Plan")) == NULL) goto done;
  if ((p->kernel = PyObject_GetAttr(prepared, s_kernel)) == NULL) goto done;
  if ((p->executor = PyObject_GetAttr(prepared, s_executor)) == NULL) goto done;
  if ((template_obj = PyObject_GetAttr(prepared, s_template)) == NULL) goto done;
  {
    PyObject* slots_attr = PyObject_GetAttr(prepared, s_slots);
    if (slots_attr == NULL) goto done;
    slots_obj = PySequence_Tuple(slots_attr);
    Py_DECREF(slots_attr);
    if (slots_obj == NULL) goto done;
  }
  if ((n_out_obj = PyObject_GetAttr(prepared, s_n_out)) == NULL) goto done;
  if ((specs = PySequence_Tuple(outputs)) == NULL) goto done;
  p->n_out = PyLong_AsSsize_t(n_out_obj);
  if (p->n_out < 0 || PyErr_Occurred()) goto done;
  if (PyTuple_GET_SIZE(specs) != p->n_out) {
    PyErr_Format(PyExc_ValueError, "Plan: %zd output descriptions for %zd outputs",
                 PyTuple_GET_SIZE(specs), p->n_out);
    goto done;
  }
  if (PyObject_GetBuffer(template_obj, &view, PyBUF_SIMPLE) < 0) goto done;
  if (view.len % 8 != 0 || view.len < 8 * PG_RUN_HEADER_WORDS) {
    PyErr_SetString(PyExc_ValueError, "Plan: the request template is not a run request");
    goto done;
  }
  p->n_words = view.len / 8;
  p->n_slots = PyTuple_GET_SIZE(slots_obj);
  p->out_words = (p->n_out > 0 ? p->n_out : 1) * (PG_OUT_HEADER_WORDS + PG_MAX_OUTPUT_DIMS);
  p->template_words = PyMem_Malloc((size_t)view.len);
  p->request = PyMem_Malloc((size_t)view.len);
  p->out = PyMem_Calloc((size_t)p->out_words, sizeof(int64_t));
  p->slots = PyMem_Calloc((size_t)(p->n_slots ? p->n_slots : 1), sizeof(Py_ssize_t));
  p->specs = PyMem_Calloc((size_t)(p->n_out ? p->n_out : 1), sizeof(OutputSpec));
  p->status = pg_runtime.new_status();
  if (!p->template_words || !p->request || !p->out || !p->slots || !p->specs || !p->status) {
    PyErr_NoMemory();
    goto done;
  }
  memcpy(p->template_words, view.buf, (size_t)view.len);
  for (Py_ssize_t i = 0; i < p->n_slots; i++) {
    Py_ssize_t slot = PyLong_AsSsize_t(PyTuple_GET_ITEM(slots_obj, i));
    if (slot < PG_RUN_HEADER_WORDS || slot >= p->n_words) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Plan: an input slot lies outside the request");
      goto done;
    }
    p->slots[i] = slot;
  }
  {
    int64_t n_in = p->template_words[PG_RUN_NUM_INPUTS];
    Py_ssize_t at = PG_RUN_HEADER_WORDS + p->n_out;
    if (n_in < 0 || n_in > p->n_words ||
        (p->input_slot = PyMem_Calloc((size_t)(n_in ? n_in : 1), sizeof(Py_ssize_t))) == NULL) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Plan: a bad input count");
      goto done;
    }
    p->n_inputs = (Py_ssize_t)n_in;
    for (Py_ssize_t k = 0; k < p->n_inputs; k++) {
      if (at + 5 > p->n_words || p->template_words[at + 4] < 0) {
        PyErr_SetString(PyExc_ValueError, "Plan: the request's inputs overrun it");
        goto done;
      }
      p->input_slot[k] = -1;
      for (Py_ssize_t j = 0; j < p->n_slots; j++) {
        if (p->slots[j] == at) p->input_slot[k] = j;
      }
      at += 5 + (Py_ssize_t)p->template_words[at + 4];
    }
  }
  for (Py_ssize_t i = 0; i < p->n_out; i++) {
    PyObject* spec = PyTuple_GET_ITEM(specs, i);
    PyObject *shape, *dtype;
    long long nbytes;
    if (!PyArg_ParseTuple(spec, "OOL:Plan output", &shape, &dtype, &nbytes)) goto done;
    if (shape != Py_None && !PyTuple_Check(shape)) {
      PyErr_SetString(PyExc_TypeError, "Plan: an output shape is a tuple, or None when the "
                      "kernel's run decides it");
      goto done;
    }
    Py_INCREF(shape);
    p->specs[i].shape = shape;
    Py_INCREF(dtype);
    p->specs[i].dtype = dtype;
    p->specs[i].nbytes = nbytes;
    PyObject* code = PyObject_GetAttr(dtype, s_tf_code);
    p->specs[i].code = code ? PyLong_AsLongLong(code) : -1;
    Py_XDECREF(code);
    if (PyErr_Occurred()) goto done;
    for (Py_ssize_t d = 0; shape != Py_None && d < PyTuple_GET_SIZE(shape); d++) {
      if (!PyLong_Check(PyTuple_GET_ITEM(shape, d))) {
        PyErr_SetString(PyExc_TypeError, "Plan: an output shape holds a non-int");
        goto done;
      }
    }
  }
  long long bytes = run_bytes(p);
  p->run_bytes = bytes >= 0 ? bytes : LLONG_MAX;
  /* The run's own request: the template with its output array and status. */
  memcpy(p->request, p->template_words, (size_t)view.len);
  p->request[PG_RUN_OUT] = (int64_t)(intptr_t)p->out;
  p->request[PG_RUN_OUT_CAPACITY] = p->out_words;
  p->request[PG_RUN_STATUS] = (int64_t)(intptr_t)p->status;
  Py_INCREF(specs);
  p->outputs = specs;
  ok = 0;
done:
  if (view.obj != NULL) PyBuffer_Release(&view);
  Py_XDECREF(template_obj);
  Py_XDECREF(slots_obj);
  Py_XDECREF(n_out_obj);
  Py_XDECREF(specs);
  return ok;
}

/* Whether the plan can still run: the device open with the same compute stream, the kernel
 * registry unchanged and the kernel instance open. -1 on error. */
static int plan_fresh(PlanObject* p) {
  unsigned long long now = epoch; /* what closes or replaces changes its state first */
  if (p->fresh_epoch == now) return 1;
  int fresh = 0;
  PyObject* closed = PyObject_GetAttr(p->device, s_closed);
  PyObject* compute = closed ? PyObject_GetAttr(p->device, s_compute_stream) : NULL;
  PyObject* generation = compute ? PyObject_GetAttr(kernels_module, s_generation) : NULL;
  PyObject* handle = generation ? PyObject_GetAttr(p->kernel, s_handle) : NULL;
  if (handle != NULL) {
    int overflow;
    fresh = closed == Py_False && compute == p->compute && handle != Py_None &&
            PyLong_Check(generation) &&
            PyLong_AsLongLongAndOverflow(generation, &overflow) == p->generation && !overflow;
  } else {
    fresh = -1;
  }
  Py_XDECREF(closed);
  Py_XDECREF(compute);
  Py_XDECREF(generation);
  Py_XDECREF(handle);
  if (fresh == 1) p->fresh_epoch = now;
  return fresh;
}

/* The exception for a failed run: the kernel's own error, as kernels.Kernel._error words it. */
static void raise_run_error(PlanObject* p, int code, TF_Status* status) {
  const char* message = pg_runtime.message ? pg_runtime.message(status) : "";
  PyObject* text = PyUnicode_DecodeUTF8(message ? message : "", message ? (Py_ssize_t)strlen(message) : 0,
                                        "replace");
  if (text == NULL) return;
  PyObject* code_obj = PyLong_FromLong(code);
  PyObject* error = code_obj ? PyObject_CallMethodObjArgs(p->kernel, s_error, p->executor,
                                                          code_obj, text, NULL) : NULL;
  Py_XDECREF(code_obj);
  Py_DECREF(text);
  if (error == NULL) return;
  PyErr_SetObject((PyObject*)Py_TYPE(error), error);
  Py_DECREF(error);
}

/* Gives back the owned memory of the output records from record `i` (at word `at`) on, when
 * the outputs cannot be handed over: each device one is wrapped in a buffer and dropped, each
 * host one freed (the exception being raised, if any, is kept). */
static void drop_owned(PlanObject* p, const int64_t* out, Py_ssize_t i, Py_ssize_t at) {
  for (; i < p->n_out; i++) {
    if ((out[at + PG_OUT_FLAGS] & PG_OUT_OWNED) && (out[at + PG_OUT_FLAGS] & PG_OUT_HOST_MEMORY)) {
      if (free_host_function != NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyObject* r = PyObject_CallFunction(free_host_function, "K", (unsigned long long)out[at]);
        Py_XDECREF(r);
        PyErr_Clear();
        PyErr_Restore(type, value, traceback);
      }
    } else if (out[at + PG_OUT_FLAGS] & PG_OUT_OWNED) {
      PyObject* orphan = make_buffer(p->executor, out[at + PG_OUT_NBYTES], (uint64_t)out[at], plan_bfc(p));
      Py_XDECREF(orphan);
    }
    int64_t ndims = out[at + PG_OUT_NUM_DIMS];
    at += PG_OUT_HEADER_WORDS + (ndims > 0 ? ndims : 0);
  }
}

/* Whether each output record has the shape and type the op's definition gave the plan;
 * else raises InternalError naming the kernel, and gives back every owned output. */
static int outputs_as_defined(PlanObject* p, const int64_t* out) {
  Py_ssize_t at = 0;
  for (Py_ssize_t i = 0; i < p->n_out; i++) {
    const OutputSpec* spec = &p->specs[i];
    int64_t ndims = out[at + PG_OUT_NUM_DIMS];
    int any_shape = spec->shape == Py_None; /* the kernel's run decides it */
    int same = out[at + PG_OUT_DTYPE] == spec->code &&
               (any_shape ? ndims >= 0 && ndims <= PG_MAX_OUTPUT_DIMS
                          : ndims == PyTuple_GET_SIZE(spec->shape));
    for (int64_t d = 0; same && !any_shape && d < ndims; d++) {
      same = PyLong_AsLongLong(PyTuple_GET_ITEM(spec->shape, d)) == out[at + PG_OUT_HEADER_WORDS + d];
    }
    if (!same) {
      PyObject* got = PyTuple_New(ndims > 0 && ndims <= PG_MAX_OUTPUT_DIMS ? ndims : 0);
      for (Py_ssize_t d = 0; got != NULL && d < PyTuple_GET_SIZE(got); d++) {
        PyObject* dim = PyLong_FromLongLong(out[at + PG_OUT_HEADER_WORDS + d]);
        if (dim == NULL) Py_CLEAR(got); else PyTuple_SET_ITEM(got, d, dim);
      }
      PyObject* name = got ? PyObject_GetAttr(spec->dtype, s_name) : NULL;
      if (name != NULL) {
        PyObject* message = PyUnicode_FromFormat(
            "%R produced output %zd of shape %R and type code %lld; the op's definition says "
            "shape %R and %U", p->kernel, i, got, (long long)out[at + PG_OUT_DTYPE],
            spec->shape, name);
        if (message != NULL) {
          PyErr_SetObject(pg_internal_error ? pg_internal_error : PyExc_RuntimeError, message);
          Py_DECREF(message);
        }
      }
      Py_XDECREF(got);
      Py_XDECREF(name);
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback);
      drop_owned(p, out, 0, 0);
      PyErr_Restore(type, value, traceback);
      return 0;
    }
    at += PG_OUT_HEADER_WORDS + (ndims > 0 ? ndims : 0);
  }
  return 1;
}

/* The output tensors from the run's output records. */
static PyObject* plan_outputs(PlanObject* p, PyObject* const* tensors, const int64_t* out) {
  if (!outputs_as_defined(p, out)) return NULL;
  PyObject* result = PyList_New(p->n_out);
  if (result == NULL) {
    drop_owned(p, out, 0, 0);
    return NULL;
  }
  Py_ssize_t at = 0;
  for (Py_ssize_t i = 0; i < p->n_out; i++) {
    const OutputSpec* spec = &p->specs[i];
    uint64_t address = (uint64_t)out[at + PG_OUT_ADDRESS];
    int owned = (out[at + PG_OUT_FLAGS] & PG_OUT_OWNED) != 0;
    int64_t alias = out[at + PG_OUT_ALIASED_INPUT];
    int64_t ndims = out[at + PG_OUT_NUM_DIMS];
    Py_ssize_t next = at + PG_OUT_HEADER_WORDS + (ndims > 0 ? ndims : 0);
    PyObject* shape = spec->shape;
    long long nbytes = spec->nbytes;
    if (shape == Py_None) { /* decided by the run: the record says */
      nbytes = out[at + PG_OUT_NBYTES];
      shape = PyTuple_New(ndims);
      for (Py_ssize_t d = 0; shape != NULL && d < ndims; d++) {
        PyObject* dim = PyLong_FromLongLong(out[at + PG_OUT_HEADER_WORDS + d]);
        if (dim == NULL) Py_CLEAR(shape); else PyTuple_SET_ITEM(shape, d, dim);
      }
      if (shape == NULL) {
        drop_owned(p, out, i, at);
        Py_DECREF(result);
        return NULL;
      }
    } else {
      Py_INCREF(shape);
    }
    if (out[at + PG_OUT_FLAGS] & PG_OUT_HOST_MEMORY) {
      /* A kernel's host-memory output: dispatch makes the tensor (values kept on the host, a
       * copy on the device), which takes over the memory at once. */
      PyObject* t = host_output_function == NULL ? NULL
          : PyObject_CallFunction(host_output_function, "OKLOOiL", (PyObject*)p,
                                  (unsigned long long)address, (long long)out[at + PG_OUT_NBYTES],
                                  spec->dtype, shape, owned, (long long)alias);
      Py_DECREF(shape);
      if (t == NULL) {
        if (!PyErr_Occurred()) {
          PyErr_SetString(PyExc_RuntimeError, "Plan: host-memory outputs are not bound");
        }
        drop_owned(p, out, i + 1, next);
        Py_DECREF(result);
        return NULL;
      }
      PyList_SET_ITEM(result, i, t);
      at = next;
      continue;
    }
    PyObject* buffer;
    if (owned || nbytes == 0) {
      buffer = make_buffer(p->executor, owned ? nbytes : 0, owned ? address : 0, plan_bfc(p));
      if (buffer == NULL) {
        Py_DECREF(shape);
        drop_owned(p, out, i, at);
        Py_DECREF(result);
        return NULL;
      }
    } else if (alias >= 0 && alias < p->n_inputs && p->input_slot[alias] >= 0) {
      buffer = SLOT(tensors[p->input_slot[alias]], off_buffer);
      Py_INCREF(buffer);
    } else {
      Py_DECREF(shape);
      PyErr_Format(pg_internal_error ? pg_internal_error : PyExc_RuntimeError,
                   "%R: output %zd of the run is neither fresh memory nor a view of a device "
                   "input", p->kernel, i);
      drop_owned(p, out, i + 1, next);
      Py_DECREF(result);
      return NULL;
    }
    if (((BufferObject*)buffer)->nbytes != 0) pg_buffer_stamp(buffer, p->ledger);
    PyObject* t = make_tensor(shape, spec->dtype, p->device, buffer); /* steals buffer */
    Py_DECREF(shape);
    if (t == NULL) {
      drop_owned(p, out, i + 1, next);
      Py_DECREF(result);
      return NULL;
    }
    PyList_SET_ITEM(result, i, t);
    at = next;
  }
  return result;
}

/* (executor, nbytes) of each output buffer that is not one of the inputs' (forwarded). A
 * plan whose one output is fresh memory keeps that tuple. */
static PyObject* fresh_outputs(PlanObject* p, PyObject* outputs, PyObject* const* tensors,
                               Py_ssize_t n) {
  Py_ssize_t n_out = PyList_GET_SIZE(outputs);
  if (n_out == 1 && p->fresh_one != NULL) {
    PyObject* b = SLOT(PyList_GET_ITEM(outputs, 0), off_buffer);
    int forwarded = 0;
    for (Py_ssize_t k = 0; k < n && !forwarded; k++) forwarded = SLOT(tensors[k], off_buffer) == b;
    if (!forwarded) return new_ref(p->fresh_one);
  }
  PyObject* fresh = PyTuple_New(n_out);
  if (fresh == NULL) return NULL;
  Py_ssize_t count = 0;
  for (Py_ssize_t i = 0; i < n_out; i++) {
    BufferObject* b = (BufferObject*)SLOT(PyList_GET_ITEM(outputs, i), off_buffer);
    if (b->nbytes == 0) continue;
    int forwarded = 0;
    for (Py_ssize_t k = 0; k < n && !forwarded; k++) forwarded = SLOT(tensors[k], off_buffer) == (PyObject*)b;
    if (forwarded) continue;
    PyObject* pair = Py_BuildValue("(OL)", b->executor, b->nbytes);
    if (pair == NULL) {
      Py_DECREF(fresh);
      return NULL;
    }
    PyTuple_SET_ITEM(fresh, count++, pair);
  }
  if (_PyTuple_Resize(&fresh, count) < 0) return NULL;
  if (n_out == 1 && count == 1 && p->fresh_one == NULL) p->fresh_one = new_ref(fresh);
  return fresh;
}

/* Records an OP; `plan` and `fresh` may be NULL (a failed run: None and ()). */
static void record_op(PyObject* op_name, uint64_t start, uint64_t end, PyObject* plan,
                      PyObject* fresh, uint64_t correlation_id) {
  Record* r = new_record();
  if (r == NULL) return;
  r->kind = REC_OP;
  r->ident = thread_ident();
  r->t0 = start;
  r->t1 = end;
  r->a = new_ref(op_name);
  r->b = plan ? new_ref(plan) : NULL;
  r->c = fresh ? new_ref(fresh) : NULL;
  r->n = (long long)correlation_id;
}

/* Runs the plan on `tensors` (the op's device inputs, n of them). Returns the output list, or
 * None (a new reference) when the plan is stale or an input is not a device tensor of the
 * plan's kind; NULL with an exception when the kernel or the host failed. */
/* The step id of the last run (TF_StepId), counted under the GIL. */
static unsigned long long step_id;
/* The last correlation id given to a recorded launch (PG_RUN_CORRELATION_ID; the slow path
 * takes its ids from here too, `next_correlation_id`), counted under the GIL. */
static unsigned long long correlation_id;
/* The launch id the host tracer's slow path gave the op this thread runs (`set_launch`): a
 * plan run inside it, which records nothing itself, hands it to the kernel. */
static __thread unsigned long long pending_launch __attribute__((tls_model("initial-exec")));

static PyObject* plan_run_tensors(PlanObject* p, PyObject* const* tensors, Py_ssize_t n,
                                  PyObject* op_name) {
  if (n != p->n_slots) Py_RETURN_NONE;
  int fresh = plan_fresh(p);
  if (fresh <= 0) {
    if (fresh < 0) return NULL;
    Py_RETURN_NONE;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* t = tensors[i];
    if (Py_TYPE(t) != tensor_type) Py_RETURN_NONE;
    PyObject* buffer = SLOT(t, off_buffer);
    if (buffer == NULL || !PyObject_TypeCheck(buffer, &BufferType)) Py_RETURN_NONE;
    const BufferObject* b = (const BufferObject*)buffer;
    if (pg_ledger_lost(b->ledger, b->stamp)) { /* the Python path says so if unbound */
      return lost_function ? PyObject_CallOneArg(lost_function, t) : new_ref(Py_None);
    }
    PyObject* ready = SLOT(t, off_ready);
    if (ready != NULL && ready != Py_None) {
      PyObject* event = PyObject_GetAttr(ready, s_event);
      if (event == NULL) return NULL;
      int pending = event != Py_None;
      Py_DECREF(event);
      if (pending) {
        PyObject* r = PyObject_CallMethodObjArgs(ready, s_make_wait, p->compute, NULL);
        if (r == NULL) return NULL;
        Py_DECREF(r);
      }
    }
  }
  if (PyList_GET_SIZE(pending_deletes) > 0) {
    PyObject* r = PyObject_CallNoArgs(flush_releases);
    if (r == NULL) return NULL;
    Py_DECREF(r);
  }
  /* The plan's own request, or, when a run of it is in progress (another thread, or a host
   * callback inside the kernel), a copy of the template. */
  int64_t* request = p->request;
  int64_t* out = p->out;
  TF_Status* status = p->status;
  int own = !p->busy;
  if (own) {
    p->busy = 1;
  } else {
    request = PyMem_Malloc(sizeof(int64_t) * (size_t)(p->n_words + p->out_words));
    status = pg_runtime.new_status();
    if (request == NULL || status == NULL) {
      PyMem_Free(request);
      if (status) pg_runtime.delete_status(status);
      return PyErr_NoMemory();
    }
    out = request + p->n_words;
    memcpy(request, p->template_words, sizeof(int64_t) * (size_t)p->n_words);
    request[PG_RUN_OUT] = (int64_t)(intptr_t)out;
    request[PG_RUN_OUT_CAPACITY] = p->out_words;
    request[PG_RUN_STATUS] = (int64_t)(intptr_t)status;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    request[p->slots[i]] = (int64_t)((BufferObject*)SLOT(tensors[i], off_buffer))->address;
  }
  request[PG_RUN_STEP_ID] = (int64_t)++step_id; /* TF_StepId: each run its own */
  /* The inputs stay alive during the call: the caller holds them. A session that starts or
   * stops while the GIL is released does not record this run. */
  PyObject* tracing = op_name != NULL ? tracer : NULL;
  uint64_t launch = tracing != NULL ? ++correlation_id : pending_launch;
  request[PG_RUN_CORRELATION_ID] = (int64_t)launch;
  uint64_t start = tracing != NULL ? now_ticks() : 0;
  int code;
  if (pg_keep_gil(p->run_bytes)) { /* see the top */
    code = kernel_run(request);
  } else {
    Py_BEGIN_ALLOW_THREADS
    code = kernel_run(request);
    Py_END_ALLOW_THREADS
  }
  uint64_t end = tracing != NULL ? now_ticks() : 0;
  PyObject* result = NULL;
  if (code != 0) {
    raise_run_error(p, code, status);
  } else {
    result = plan_outputs(p, tensors, out);
  }
  if (own) {
    p->busy = 0;
  } else {
    PyMem_Free(request);
    pg_runtime.delete_status(status);
  }
  if (tracing != NULL && tracing == tracer) {
    PyObject* fresh_list = result ? fresh_outputs(p, result, tensors, n) : NULL;
    if (result != NULL && fresh_list == NULL) {
      Py_CLEAR(result);
    } else {
      PyObject *type, *value, *traceback;
      PyErr_Fetch(&type, &value, &traceback); /* naming a new thread may clear errors */
      record_op(op_name, start, end, result ? (PyObject*)p : NULL, fresh_list, launch);
      PyErr_Restore(type, value, traceback);
    }
    Py_XDECREF(fresh_list);
  }
  return result;
}

static PyObject* plan_run(PlanObject* p, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 2 || (nargs == 2 && !PyUnicode_Check(args[1]))) {
    PyErr_SetString(PyExc_TypeError, "Plan.run(tensors, op_name=None): op_name is a str");
    return NULL;
  }
  PyObject* seq = PySequence_Fast(args[0], "Plan.run takes a sequence of tensors");
  if (seq == NULL) return NULL;
  PyObject* r = plan_run_tensors(p, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq),
                                 nargs == 2 ? args[1] : NULL);
  Py_DECREF(seq);
  return r;
}

static PyMethodDef plan_methods[] = {
    {"run", (PyCFunction)(void (*)(void))plan_run, METH_FASTCALL,
     "run(tensors, op_name=None): the output tensors, or None when the plan went stale "
     "(streams replaced, kernels changed or closed) or the inputs are not the plan's. With "
     "op_name, a profiling session's host tracer records the run under that name."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef plan_members[] = {
    {"device", T_OBJECT, offsetof(PlanObject, device), READONLY, "the device it runs on"},
    {"compute", T_OBJECT, offsetof(PlanObject, compute), READONLY,
     "the device's compute stream when the plan was made"},
    {"prepared", T_OBJECT, offsetof(PlanObject, prepared), READONLY, "the kernels.PreparedRun"},
    {"kernel", T_OBJECT, offsetof(PlanObject, kernel), READONLY, "the kernel instance"},
    {"outputs", T_OBJECT, offsetof(PlanObject, outputs), READONLY,
     "(shape, dtype, nbytes) per output"},
    {"generation", T_LONGLONG, offsetof(PlanObject, generation), READONLY,
     "kernels.generation when the plan was made"},
    {"run_bytes", T_LONGLONG, offsetof(PlanObject, run_bytes), READONLY,
     "bytes of the run's inputs and outputs together: runs of at most hold_gil_bytes() keep "
     "the GIL (unless a host callback is pending)"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "How to run one op on one device for given input types and shapes.",
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_methods = plan_methods,
    .tp_members = plan_members,
    .tp_init = (initproc)plan_init,
    .tp_new = PyType_GenericNew,
};

/* ---- execute ------------------------------------------------------------------------------ */

/* A tensor's dtype code, shape and device (borrowed), as plan keys hold them; 0 when a slot
 * is unset. */
static int tensor_parts(PyObject* t, PyObject** code, PyObject** shape, PyObject** device) {
  PyObject* dtype = SLOT(t, off_dtype);
  *code = dtype && Py_TYPE(dtype) == dtype_type ? SLOT(dtype, off_code) : NULL;
  *shape = SLOT(t, off_shape);
  *device = SLOT(t, off_device);
  return *code != NULL && *shape != NULL && *device != NULL;
}

/* dispatch's plan key of `op_name` on `n` inputs: (op, scope, then each input's dtype code,
 * shape and device), or None when an input is not a Tensor. */
static PyObject* make_key(PyObject* op_name, PyObject* const* inputs, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; i++) {
    if (Py_TYPE(inputs[i]) != tensor_type) Py_RETURN_NONE;
  }
  PyObject* scope;
  if (PyContextVar_Get(scope_var, Py_None, &scope) < 0) return NULL;
  PyObject* key = PyTuple_New(2 + 3 * n);
  if (key == NULL) {
    Py_DECREF(scope);
    return NULL;
  }
  Py_INCREF(op_name);
  PyTuple_SET_ITEM(key, 0, op_name);
  PyTuple_SET_ITEM(key, 1, scope);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *code, *shape, *device;
    if (!tensor_parts(inputs[i], &code, &shape, &device)) {
      Py_DECREF(key);
      Py_RETURN_NONE;
    }
    Py_INCREF(code);
    PyTuple_SET_ITEM(key, 2 + 3 * i, code);
    Py_INCREF(shape);
    PyTuple_SET_ITEM(key, 3 + 3 * i, shape);
    Py_INCREF(device);
    PyTuple_SET_ITEM(key, 4 + 3 * i, device);
  }
  return key;
}

static int check_bound(void) {
  if (tensor_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "pluggable._compiled is not bound to pluggable.tensors.tensor");
    return -1;
  }
  return 0;
}

static PyObject* fast_plan_key(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "plan_key(op_name, inputs)");
    return NULL;
  }
  if (check_bound() < 0) return NULL;
  PyObject* seq = PySequence_Fast(args[1], "plan_key: inputs must be a sequence");
  if (seq == NULL) return NULL;
  PyObject* key = make_key(args[0], PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq));
  Py_DECREF(seq);
  return key;
}

int pg_plans_usable(void) {
  if (check_bound() < 0) return -1;
  if (plans == NULL || kernels_module == NULL) return 0; /* no plan made yet */
  /* dispatch's "general": placement logging or the synchronise-after-every-op mode */
  PyObject* general = PyDict_GetItemWithError(settings, s_general);
  if (general == NULL && PyErr_Occurred()) return -1;
  return general == NULL || general == Py_False;
}

PyObject* pg_run_plan(PyObject* key, PyObject* const* items, Py_ssize_t n, PyObject* op_name) {
  PyObject* plan = PyDict_GetItemWithError(plans, key);
  if (plan == NULL) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  if (!PyObject_TypeCheck(plan, &PlanType)) Py_RETURN_NONE;
  Py_INCREF(plan); /* a run may drop it from the table (a nested op clearing it) */
  PyObject* r = plan_run_tensors((PlanObject*)plan, items, n, op_name);
  Py_DECREF(plan);
  return r;
}

PyObject* pg_device_scope(void) {
  PyObject* scope;
  return PyContextVar_Get(scope_var, Py_None, &scope) < 0 ? NULL : scope;
}

PyObject* pg_tensor_signature(PyObject* t) {
  PyObject *code, *shape, *device;
  if (!tensor_parts(t, &code, &shape, &device)) Py_RETURN_NONE;
  return PyTuple_Pack(3, code, shape, device);
}

/* ---- the plan cache in front of dispatch._plans ---------------------------------------------
 * A repeated op finds its plan without building its key: a small table, indexed by the op
 * name's address and the input count, remembers the last key and plan found in _plans there.
 * An entry serves a call whose op name, scope, and inputs' dtype codes and devices are the
 * same objects as its key's (the entry holds the key, so they stay alive), and whose shapes
 * are equal. It is valid only while _plans is unchanged since it was filled (the dict's
 * version tag), so a plan dispatch drops or replaces is never run from here. Building and
 * hashing the key and comparing it in the dict cost about a tenth of a 1-element op.
 * Python 3.12 deprecates the version tag: there, every call looks in _plans. */
#if PY_VERSION_HEX < 0x030C0000
#define PG_PLAN_CACHE 64
typedef struct {
  PyObject* key;  /* the key of `plan` in _plans (owned), or NULL */
  PyObject* plan; /* owned */
  uint64_t version;
} PlanCacheEntry;
static PlanCacheEntry plan_cache[PG_PLAN_CACHE];

static Py_ssize_t plan_cache_slot(PyObject* op_name, Py_ssize_t n) {
  return (Py_ssize_t)((((uintptr_t)op_name >> 4) ^ (uintptr_t)n * 31u) % PG_PLAN_CACHE);
}

static uint64_t plans_version(void) { return ((PyDictObject*)plans)->ma_version_tag; }

static void drop_cached(PlanCacheEntry* e) {
  PyObject *key = e->key, *plan = e->plan;
  e->key = e->plan = NULL;
  Py_XDECREF(key);
  Py_XDECREF(plan);
}

static int same_shape(PyObject* a, PyObject* b) {
  if (a == b) return 1;
  if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b)) return 0;
  Py_ssize_t n = PyTuple_GET_SIZE(a);
  if (PyTuple_GET_SIZE(b) != n) return 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
    if (x == y) continue;
    if (!PyLong_CheckExact(x) || !PyLong_CheckExact(y)) return 0;
    int overflow_x, overflow_y;
    long long vx = PyLong_AsLongLongAndOverflow(x, &overflow_x);
    long long vy = PyLong_AsLongLongAndOverflow(y, &overflow_y);
    if (overflow_x || overflow_y || vx != vy) return 0;
  }
  return 1;
}

/* The cached plan (borrowed) for this call, or NULL. */
static PyObject* cached_plan(PyObject* op_name, PyObject* const* items, Py_ssize_t n,
                             PyObject* scope) {
  PlanCacheEntry* e = &plan_cache[plan_cache_slot(op_name, n)];
  PyObject* key = e->key;
  if (key == NULL) return NULL;
  if (e->version != plans_version()) { /* _plans changed: what it dropped is dropped here too */
    drop_cached(e);
    return NULL;
  }
  if (PyTuple_GET_SIZE(key) != 2 + 3 * n ||
      PyTuple_GET_ITEM(key, 0) != op_name || PyTuple_GET_ITEM(key, 1) != scope) {
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* t = items[i];
    if (Py_TYPE(t) != tensor_type) return NULL;
    PyObject *code, *shape, *device;
    if (!tensor_parts(t, &code, &shape, &device)) return NULL;
    if (PyTuple_GET_ITEM(key, 2 + 3 * i) != code || PyTuple_GET_ITEM(key, 4 + 3 * i) != device ||
        !same_shape(PyTuple_GET_ITEM(key, 3 + 3 * i), shape)) {
      return NULL;
    }
  }
  return e->plan;
}

static void cache_plan(PyObject* key, PyObject* plan, Py_ssize_t n) {
  PlanCacheEntry* e = &plan_cache[plan_cache_slot(PyTuple_GET_ITEM(key, 0), n)];
  PyObject *old_key = e->key, *old_plan = e->plan;
  Py_INCREF(key);
  Py_INCREF(plan);
  e->key = key;
  e->plan = plan;
  e->version = plans_version();
  Py_XDECREF(old_key);
  Py_XDECREF(old_plan);
}
#endif

/* The outputs of `op_name`'s remembered plan for the `n` inputs at `items`, or None. */
static PyObject* execute_items(PyObject* op_name, PyObject* const* items, Py_ssize_t n) {
  int usable = pg_plans_usable();
  if (usable <= 0) {
    if (usable < 0) return NULL;
    Py_RETURN_NONE;
  }
#ifdef PG_PLAN_CACHE
  PyObject* scope = pg_device_scope();
  if (scope == NULL) return NULL;
  PyObject* plan = cached_plan(op_name, items, n, scope);
  Py_DECREF(scope);
  if (plan != NULL) {
    Py_INCREF(plan); /* a run may drop it from the cache (a nested op refilling the slot) */
    PyObject* r = plan_run_tensors((PlanObject*)plan, items, n, op_name);
    Py_DECREF(plan);
    return r;
  }
#endif
  PyObject* key = make_key(op_name, items, n);
  if (key == NULL || key == Py_None) return key;
  PyObject* found = PyDict_GetItemWithError(plans, key);
  PyObject* r;
  if (found == NULL) {
    r = PyErr_Occurred() ? NULL : (Py_INCREF(Py_None), Py_None);
  } else if (!PyObject_TypeCheck(found, &PlanType)) {
    r = (Py_INCREF(Py_None), Py_None);
  } else {
    Py_INCREF(found);
#ifdef PG_PLAN_CACHE
    cache_plan(key, found, n);
#endif
    r = plan_run_tensors((PlanObject*)found, items, n, op_name);
    Py_DECREF(found);
  }
  Py_DECREF(key);
  return r;
}

static PyObject* untaped_execute(PyObject* op_name, PyObject* inputs);

/* execute(op_name, inputs): the outputs of a remembered plan, or None (with a tape recording,
 * the outputs of the recorder). */
static PyObject* fast_execute(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "execute(op_name, inputs)");
    return NULL;
  }
  if (pg_tape_recorder() != NULL) return pg_record_on_tape(args[0], args[1], NULL);
  return untaped_execute(args[0], args[1]);
}

static PyObject* untaped_execute(PyObject* op_name, PyObject* inputs) {
  if (PyTuple_CheckExact(inputs)) {
    return execute_items(op_name, &PyTuple_GET_ITEM(inputs, 0), PyTuple_GET_SIZE(inputs));
  }
  if (PyList_CheckExact(inputs)) {
    return execute_items(op_name, PySequence_Fast_ITEMS(inputs), PyList_GET_SIZE(inputs));
  }
  Py_RETURN_NONE;
}

PyObject* pg_plan_outputs(PyObject* op_name, PyObject* inputs, PyObject* attrs) {
  int plain = attrs == NULL || attrs == Py_None;
  if (!plain) {
    plain = PyObject_Not(attrs);
    if (plain < 0) return NULL;
  }
  PyObject* outputs = plain ? untaped_execute(op_name, inputs) : (Py_INCREF(Py_None), Py_None);
  if (outputs == Py_None) {
    Py_DECREF(outputs);
    outputs = pg_execute_constants(op_name, inputs, attrs == Py_None ? NULL : attrs);
  }
  return outputs;
}

/* The outputs of `op_name` on `inputs` with `attrs` (NULL or None: none) without the tape:
 * from a remembered plan (one with host values included), else from dispatch._missed. */
static PyObject* untaped_outputs(PyObject* op_name, PyObject* inputs, PyObject* attrs) {
  PyObject* outputs = pg_plan_outputs(op_name, inputs, attrs);
  if (outputs == NULL || PyList_CheckExact(outputs)) return outputs;
  /* no plan: `outputs` is the call's constant key or None */
  PyObject* found = outputs;
  if (slow_execute == NULL) { /* pluggable.eager.dispatch binds it at its import */
    Py_DECREF(found);
    PyErr_SetString(PyExc_RuntimeError,
                    "pluggable._compiled.run: the op dispatcher is not bound; import pluggable.eager "
                    "(importing pluggable.ops does) before running ops");
    return NULL;
  }
  PyObject* call[4] = {op_name, inputs, attrs == NULL ? Py_None : attrs, found};
  outputs = PyObject_Vectorcall(slow_execute, call, 4, NULL); /* _missed(op, inputs, attrs, found) */
  Py_DECREF(found);
  return outputs;
}

/* run_untaped(op_name, inputs, attrs): the op's outputs (a list), run as `execute` runs it but
 * never handed to the tape's recorder: the recorder's own run. */
static PyObject* fast_run_untaped(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "run_untaped(op_name, inputs, attrs)");
    return NULL;
  }
  return untaped_outputs(args[0], args[1], args[2]);
}

/* run(op_name, inputs): the op's first output: from its remembered plan (one with host values
 * among the inputs included), or from dispatch.execute when there is none (which then
 * remembers one); with a tape recording, from the tape's recorder. The per-call path of
 * ops.add, Tensor.__add__ and the other one-output ops. */
static PyObject* fast_run(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "run(op_name, inputs)");
    return NULL;
  }
  PyObject* outputs = pg_tape_recorder() != NULL ? pg_record_on_tape(args[0], args[1], NULL)
                                            : untaped_outputs(args[0], args[1], NULL);
  if (outputs == NULL) return NULL;
  PyObject* first = PySequence_GetItem(outputs, 0);
  Py_DECREF(outputs);
  return first;
}

/* ---- raw_ops ---------------------------------------------------------------------------- */

/* A raw_ops function: called with exactly its inputs as keyword arguments, it runs the op's
 * plan (the first output, or a tuple of them); any other call, or one without a plan, goes to
 * the Python function `slow`, which checks the arguments and runs the op. Attributes
 * (__signature__, __name__, __doc__, ...) are set from Python. */
typedef struct {
  PyObject_HEAD
  PyObject* op_name;
  PyObject* inputs; /* tuple of the inputs' keyword names */
  PyObject* slow;
  PyObject* dict;
  int single; /* one output: return it, not a tuple */
  vectorcallfunc vectorcall;
} RawOpObject;

#define RAW_OP_MAX_INPUTS 8

static PyObject* raw_op_call(RawOpObject* r, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  Py_ssize_t n_in = PyTuple_GET_SIZE(r->inputs);
  if (pg_tape_recorder() == NULL && n == 0 && kwnames != NULL && PyTuple_GET_SIZE(kwnames) == n_in && n_in > 0 &&
      n_in <= RAW_OP_MAX_INPUTS) {
    PyObject* items[RAW_OP_MAX_INPUTS];
    int matched = 1;
    for (Py_ssize_t i = 0; i < n_in && matched; i++) {
      PyObject* want = PyTuple_GET_ITEM(r->inputs, i);
      matched = 0;
      for (Py_ssize_t k = 0; k < n_in; k++) {
        PyObject* got = PyTuple_GET_ITEM(kwnames, k);
        if (got == want || PyUnicode_Compare(got, want) == 0) {
          items[i] = args[k];
          matched = 1;
          break;
        }
      }
    }
    PyErr_Clear();
    if (matched) {
      PyObject* outputs = execute_items(r->op_name, items, n_in);
      if (outputs == NULL) return NULL;
      if (outputs != Py_None) {
        PyObject* result = r->single ? PySequence_GetItem(outputs, 0) : PySequence_Tuple(outputs);
        Py_DECREF(outputs);
        return result;
      }
      Py_DECREF(outputs);
    }
  }
  return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

static int raw_op_init(RawOpObject* r, PyObject* args, PyObject* kwargs) {
  static char* names[] = {"op_name", "inputs", "single", "slow", NULL};
  PyObject *op_name, *inputs, *slow;
  int single;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UO!pO:RawOp", names, &op_name, &PyTuple_Type,
                                   &inputs, &single, &slow)) {
    return -1;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); i++) {
    if (!PyUnicode_Check(PyTuple_GET_ITEM(inputs, i))) {
      PyErr_SetString(PyExc_TypeError, "RawOp: input names must be strings");
      return -1;
    }
  }
  if (!PyCallable_Check(slow)) {
    PyErr_SetString(PyExc_TypeError, "RawOp: slow must be callable");
    return -1;
  }
  set_ref(&r->op_name, op_name);
  set_ref(&r->inputs, inputs);
  set_ref(&r->slow, slow);
  r->single = single;
  r->vectorcall = (vectorcallfunc)raw_op_call;
  return 0;
}

static int raw_op_traverse(RawOpObject* r, visitproc visit, void* arg) {
  Py_VISIT(r->op_name);
  Py_VISIT(r->inputs);
  Py_VISIT(r->slow);
  Py_VISIT(r->dict);
  return 0;
}

static int raw_op_clear(RawOpObject* r) {
  Py_CLEAR(r->op_name);
  Py_CLEAR(r->inputs);
  Py_CLEAR(r->slow);
  Py_CLEAR(r->dict);
  return 0;
}

static void raw_op_dealloc(RawOpObject* r) {
  PyObject_GC_UnTrack(r);
  raw_op_clear(r);
  Py_TYPE(r)->tp_free((PyObject*)r);
}

static PyObject* raw_op_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  (void)args;
  (void)kwargs;
  RawOpObject* r = (RawOpObject*)type->tp_alloc(type, 0);
  if (r != NULL) r->vectorcall = (vectorcallfunc)raw_op_call;
  return (PyObject*)r;
}

static PyObject* raw_op_get(PyObject* self, PyObject* obj, PyObject* type) {
  (void)obj;
  (void)type;
  Py_INCREF(self); /* a function of a module, never bound to an instance */
  return self;
}

static PyTypeObject RawOpType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pluggable._compiled.RawOp",
    .tp_basicsize = sizeof(RawOpObject),
    .tp_dealloc = (destructor)raw_op_dealloc,
    .tp_vectorcall_offset = offsetof(RawOpObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A raw_ops function: its inputs as keyword arguments run the op's plan.",
    .tp_traverse = (traverseproc)raw_op_traverse,
    .tp_clear = (inquiry)raw_op_clear,
    .tp_descr_get = raw_op_get,
    .tp_dictoffset = offsetof(RawOpObject, dict),
    .tp_init = (initproc)raw_op_init,
    .tp_new = raw_op_new,
};

/* ---- binding ------------------------------------------------------------------------------ */

static Py_ssize_t slot_offset(PyTypeObject* type, const char* name) {
  PyObject* descr = PyDict_GetItemString(type->tp_dict, name);
  if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type) {
    PyErr_Format(PyExc_TypeError, "%s has no slot %s", type->tp_name, name);
    return -1;
  }
  PyMemberDef* member = ((PyMemberDescrObject*)descr)->d_member;
  if (member->type != T_OBJECT_EX) {
    PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
    return -1;
  }
  return member->offset;
}

void* pg_function_address(PyObject* functions, const char* name, const char* who) {
  PyObject* value = PyDict_GetItemString(functions, name);
  if (value == NULL || value == Py_None) {
    PyErr_Format(PyExc_ValueError, "%s: no address for %s", who, name);
    return NULL;
  }
  void* p = PyLong_AsVoidPtr(value);
  if (p == NULL && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: %s is NULL", who, name);
  return p;
}

static void* address_of(PyObject* functions, const char* name) {
  return pg_function_address(functions, name, "bind_runtime");
}

/* bind_runtime({name: address}): the runtime library's functions. */
static PyObject* fast_bind_runtime(PyObject* self, PyObject* functions) {
  (void)self;
  if (!PyDict_Check(functions)) {
    PyErr_SetString(PyExc_TypeError, "bind_runtime takes a dict of function addresses");
    return NULL;
  }
  void* run = address_of(functions, "pluggable_KernelRun");
  void* create = run ? address_of(functions, "TF_NewStatus") : NULL;
  void* destroy = create ? address_of(functions, "TF_DeleteStatus") : NULL;
  void* message = destroy ? address_of(functions, "TF_Message") : NULL;
  void* dealloc = message ? address_of(functions, "pluggable_BFCDeallocate") : NULL;
  void* alloc = dealloc ? address_of(functions, "pluggable_BFCAllocate") : NULL;
  void* code = alloc ? address_of(functions, "TF_GetCode") : NULL;
  void* reset = code ? address_of(functions, "pluggable_ResetStatus") : NULL;
  void* claim = reset ? address_of(functions, "pluggable_ClaimDeviceMemory") : NULL;
  void* release = claim ? address_of(functions, "pluggable_ReleaseDeviceMemory") : NULL;
  if (release == NULL) return NULL;
  *(void**)&pg_runtime.claim_memory = claim;
  *(void**)&pg_runtime.release_memory = release;
  *(void**)&pg_runtime.reset = reset;
  *(void**)&pg_runtime.new_status = create;
  *(void**)&pg_runtime.delete_status = destroy;
  *(void**)&pg_runtime.message = message;
  *(void**)&pg_runtime.code = code;
  *(void**)&pg_runtime.bfc_allocate = alloc;
  *(void**)&kernel_run = run;
  *(void**)&bfc_deallocate = dealloc;
  Py_RETURN_NONE;
}

static int set_ref(PyObject** target, PyObject* value) {
  Py_XINCREF(value);
  Py_XSETREF(*target, value);
  return 0;
}

/* bind_tensors(Tensor, DeviceBuffer, release, DType, device_scope, lost) */
static PyObject* fast_bind_tensors(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *tensor, *buffer, *release, *dtype, *scope, *lost;
  if (!PyArg_ParseTuple(args, "O!O!OO!OO:bind_tensors", &PyType_Type, &tensor, &PyType_Type,
                        &buffer, &release, &PyType_Type, &dtype, &scope, &lost)) {
    return NULL;
  }
  if (!PyType_IsSubtype((PyTypeObject*)buffer, &BufferType) ||
      ((PyTypeObject*)buffer)->tp_basicsize != BufferType.tp_basicsize) {
    PyErr_SetString(PyExc_TypeError, "bind_tensors: the buffer type must subclass Buffer with no slots");
    return NULL;
  }
  PyTypeObject* t = (PyTypeObject*)tensor;
  Py_ssize_t offs[6];
  const char* names[6] = {"_shape", "_dtype", "_device", "_array", "_buffer", "_ready"};
  for (int i = 0; i < 6; i++) {
    if ((offs[i] = slot_offset(t, names[i])) < 0) return NULL;
  }
  Py_ssize_t code = slot_offset((PyTypeObject*)dtype, "code");
  if (code < 0) return NULL;
  off_shape = offs[0];
  off_dtype = offs[1];
  off_device = offs[2];
  off_array = offs[3];
  off_buffer = offs[4];
  off_ready = offs[5];
  off_code = code;
  set_ref((PyObject**)&tensor_type, tensor);
  set_ref((PyObject**)&buffer_type, buffer);
  set_ref((PyObject**)&dtype_type, dtype);
  set_ref(&release_function, release);
  set_ref(&scope_var, scope);
  set_ref(&lost_function, lost);
  Py_RETURN_NONE;
}

/* bind_dispatch(plans, settings, missed): dispatch's plan table, settings and what runs a
 * call the C lookups found no plan for. */
static PyObject* fast_bind_dispatch(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *plan_table, *settings_dict, *execute;
  if (!PyArg_ParseTuple(args, "O!O!O:bind_dispatch", &PyDict_Type, &plan_table, &PyDict_Type,
                        &settings_dict, &execute)) {
    return NULL;
  }
  set_ref(&plans, plan_table);
  set_ref(&settings, settings_dict);
  set_ref(&slow_execute, execute);
  Py_RETURN_NONE;
}

/* bind_host_outputs(make, free): what makes the tensor of a kernel's host-memory output,
 * make(plan, address, nbytes, dtype, shape, owned, aliased_input), and what frees such an
 * output that cannot be handed over, free(address). */
static PyObject* fast_bind_host_outputs(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *make, *free_fn;
  if (!PyArg_ParseTuple(args, "OO:bind_host_outputs", &make, &free_fn)) return NULL;
  if (!PyCallable_Check(make) || !PyCallable_Check(free_fn)) {
    PyErr_SetString(PyExc_TypeError, "bind_host_outputs: make and free must be callable");
    return NULL;
  }
  set_ref(&host_output_function, make);
  set_ref(&free_host_function, free_fn);
  Py_RETURN_NONE;
}

/* bind_kernels(registry, pending_deletes, flush_releases): the kernel registry (its public
 * `generation` counts changes of the enabled kernels), the list of kernel instances whose
 * delete_func waits for a safe point, and what runs them. The registry binds itself at import. */
static PyObject* fast_bind_kernels(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *registry, *pending, *flush;
  if (!PyArg_ParseTuple(args, "OO!O:bind_kernels", &registry, &PyList_Type, &pending, &flush)) {
    return NULL;
  }
  if (!PyCallable_Check(flush)) {
    PyErr_SetString(PyExc_TypeError, "bind_kernels: flush_releases must be callable");
    return NULL;
  }
  set_ref(&kernels_module, registry);
  set_ref(&pending_deletes, pending);
  set_ref(&flush_releases, flush);
  Py_RETURN_NONE;
}

/* set_tracer(tracer or None): records ops and frees for the host tracer while it is set. */
static PyObject* fast_set_tracer(PyObject* self, PyObject* new_tracer) {
  (void)self;
  cached_ident_known = 0; /* a new tracer names its threads afresh */
  if (new_tracer == Py_None) {
    if (tracer != NULL) clock_stop = pg_profiler_clock_pair(clock_tsc > 0, realtime_ns);
    Py_CLEAR(tracer);
    Py_CLEAR(tracer_names);
    Py_CLEAR(tracer_ident);
    Py_RETURN_NONE;
  }
  PyObject* names = PyObject_GetAttrString(new_tracer, "thread_names");
  PyObject* ident = names ? PyObject_GetAttrString(new_tracer, "_ident") : NULL;
  if (ident == NULL || !PyDict_Check(names)) {
    if (ident != NULL) PyErr_SetString(PyExc_TypeError, "set_tracer: thread_names must be a dict");
    Py_XDECREF(names);
    Py_XDECREF(ident);
    return NULL;
  }
  Py_XSETREF(tracer_names, names);
  Py_XSETREF(tracer_ident, ident);
  clear_records(); /* what an earlier session left untaken */
  if (clock_tsc < 0) clock_tsc = pg_profiler_tsc_usable();
  clock_start = clock_stop = pg_profiler_clock_pair(clock_tsc > 0, realtime_ns);
  set_ref(&tracer, new_tracer);
  Py_RETURN_NONE;
}

/* record(tuple): a record of the Python hooks, kept in order with the C ones. */
static PyObject* fast_record(PyObject* self, PyObject* record) {
  (void)self;
  if (!PyTuple_Check(record)) {
    PyErr_SetString(PyExc_TypeError, "record() takes a record tuple");
    return NULL;
  }
  if (tracer == NULL) Py_RETURN_NONE; /* a hook that ran as the session ended */
  Record* r = new_record();
  if (r != NULL) {
    r->kind = RECORD_OBJECT;
    r->ident = 0;
    r->t0 = r->t1 = 0;
    r->a = new_ref(record);
    r->b = r->c = NULL;
    r->n = 0;
  }
  Py_RETURN_NONE;
}

/* next_correlation_id(): the slow path's launch ids come from the plans' counter. */
static PyObject* fast_next_correlation_id(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(++correlation_id);
}

/* set_launch(id): the launch id of the op the calling thread runs next (0: none). */
static PyObject* fast_set_launch(PyObject* self, PyObject* id) {
  (void)self;
  unsigned long long value = PyLong_AsUnsignedLongLong(id);
  if (value == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  pending_launch = value;
  Py_RETURN_NONE;
}

/* launch(): what set_launch set on the calling thread. */
static PyObject* fast_launch(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(pending_launch);
}

/* One record as host_tracer.py's tuple; Py_None (a new reference) for a FREE whose executor
 * has no allocator any more. */
static PyObject* record_tuple(const Record* r, PG_ClockPair stop) {
  if (r->kind == RECORD_OBJECT) return new_ref(r->a);
  int tsc = clock_tsc > 0;
  PyObject* ident = PyLong_FromUnsignedLong(r->ident);
  PyObject* t0 = PyLong_FromLongLong(pg_profiler_ticks_to_ns(tsc, clock_start, stop, r->t0));
  if (r->kind == REC_OP) {
    PyObject* t1 = PyLong_FromLongLong(pg_profiler_ticks_to_ns(tsc, clock_start, stop, r->t1));
    PyObject* fresh = r->c ? new_ref(r->c) : PyTuple_New(0);
    PyObject* launch = PyLong_FromUnsignedLongLong((unsigned long long)r->n);
    PyObject* t = (ident && t0 && t1 && fresh && launch) ? PyTuple_New(8) : NULL;
    if (t == NULL) {
      Py_XDECREF(ident);
      Py_XDECREF(t0);
      Py_XDECREF(t1);
      Py_XDECREF(fresh);
      Py_XDECREF(launch);
      return NULL;
    }
    PyTuple_SET_ITEM(t, 0, PyLong_FromLong(REC_OP)); /* a cached small int */
    PyTuple_SET_ITEM(t, 1, ident);
    PyTuple_SET_ITEM(t, 2, t0);
    PyTuple_SET_ITEM(t, 3, t1);
    PyTuple_SET_ITEM(t, 4, new_ref(r->a));
    PyTuple_SET_ITEM(t, 5, new_ref(r->b ? r->b : Py_None));
    PyTuple_SET_ITEM(t, 6, fresh);
    PyTuple_SET_ITEM(t, 7, launch);
    return t;
  }
  PyObject* allocator = PyObject_GetAttr(r->a, s_allocator);
  PyObject* n = PyLong_FromLongLong(r->n);
  PyObject* t = NULL;
  if (ident && t0 && allocator && n) {
    if (allocator == Py_None) {
      t = new_ref(Py_None);
    } else if ((t = PyTuple_New(5)) != NULL) {
      PyTuple_SET_ITEM(t, 0, PyLong_FromLong(REC_FREE));
      PyTuple_SET_ITEM(t, 1, ident);
      PyTuple_SET_ITEM(t, 2, t0);
      PyTuple_SET_ITEM(t, 3, allocator);
      PyTuple_SET_ITEM(t, 4, n);
      return t;
    }
  }
  Py_XDECREF(ident);
  Py_XDECREF(t0);
  Py_XDECREF(allocator);
  Py_XDECREF(n);
  return t;
}

int pg_records_visit(int (*fn)(void* ctx, const PgRecordView* record), void* ctx) {
  /* While the session runs, a pair read now scales the ticks recorded so far. */
  PG_ClockPair stop = tracer != NULL ? pg_profiler_clock_pair(clock_tsc > 0, realtime_ns)
                                     : clock_stop;
  int tsc = clock_tsc > 0;
  /* pg_profiler_ticks_to_ns, its scale worked out once. */
  double span = (double)(int64_t)(stop.ticks - clock_start.ticks);
  int scaled = tsc && span > 0;
  double per_tick = scaled ? (double)(stop.ns - clock_start.ns) / span : 0;
#define TO_NS(t)                                                                          \
  (scaled ? clock_start.ns + (int64_t)((double)(int64_t)((t) - clock_start.ticks) * per_tick) \
          : pg_profiler_ticks_to_ns(tsc, clock_start, stop, (t)))
  for (Chunk* c = first_chunk; c != NULL; c = c->next) {
    for (size_t i = 0; i < c->used; i++) {
      const Record* r = &c->records[i];
      PgRecordView v = {r->kind == RECORD_OBJECT ? PG_RECORD_TUPLE : r->kind, r->ident, 0, 0,
                        r->a, r->b, r->c, r->n};
      if (r->kind != RECORD_OBJECT) {
        v.start_ns = TO_NS(r->t0);
        if (r->kind == REC_OP) v.end_ns = TO_NS(r->t1);
      }
      int rc = fn(ctx, &v);
      if (rc < 0) return rc;
    }
  }
#undef TO_NS
  return 0;
}

Py_ssize_t pg_records_count(void) {
  Py_ssize_t total = 0;
  for (Chunk* c = first_chunk; c != NULL; c = c->next) total += (Py_ssize_t)c->used;
  return total;
}

unsigned long long pg_records_lost(void) { return records_lost; }

void pg_records_clear(void) { clear_records(); }

/* take_records(): every record made since the last call, as tuples, oldest first; the store
 * is emptied. */
static PyObject* fast_take_records(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  Py_ssize_t total = 0;
  for (Chunk* c = first_chunk; c != NULL; c = c->next) total += (Py_ssize_t)c->used;
  /* While the session runs, a pair read now scales the ticks recorded so far. */
  PG_ClockPair stop = tracer != NULL ? pg_profiler_clock_pair(clock_tsc > 0, realtime_ns)
                                     : clock_stop;
  PyObject* list = PyList_New(total);
  if (list == NULL) return NULL;
  /* Tens of thousands of new tuples, none of them garbage: the collector would walk the
   * young ones again and again while they are made. */
  int collecting = PyGC_Disable();
  Py_ssize_t at = 0;
  for (Chunk* c = first_chunk; c != NULL; c = c->next) {
    for (size_t i = 0; i < c->used; i++) {
      PyObject* t = record_tuple(&c->records[i], stop);
      if (t == NULL) {
        if (collecting) PyGC_Enable();
        Py_DECREF(list);
        return NULL;
      }
      if (t == Py_None) {
        Py_DECREF(t);
        continue;
      }
      PyList_SET_ITEM(list, at++, t);
    }
  }
  if (collecting) PyGC_Enable();
  if (at < total && PyList_SetSlice(list, at, total, NULL) < 0) {
    Py_DECREF(list);
    return NULL;
  }
  unsigned long long lost = records_lost;
  clear_records();
  if (lost) {
    PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                     "the host tracer lost %llu records: no memory for more", lost);
  }
  return list;
}

static PyObject* fast_invalidate(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  epoch++;
#ifdef PG_PLAN_CACHE
  /* A closed device's plans hold its kernels and buffers: they go now, not when their slots
   * are next used. */
  for (int i = 0; i < PG_PLAN_CACHE; i++) drop_cached(&plan_cache[i]);
#endif
  Py_RETURN_NONE;
}

/* hold_gil_bytes([n]): the threshold before the call; sets it to `n` when given. */
static PyObject* fast_hold_gil_bytes(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs > 1) {
    PyErr_SetString(PyExc_TypeError, "hold_gil_bytes([n]) takes at most one argument");
    return NULL;
  }
  long long before = hold_gil_bytes;
  if (nargs == 1) {
    long long n = PyLong_AsLongLong(args[0]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < -1) {
      PyErr_Format(PyExc_ValueError,
                   "hold_gil_bytes(%lld): give a number of bytes, or -1 to release the GIL for "
                   "every run", n);
      return NULL;
    }
    hold_gil_bytes = n;
  }
  return PyLong_FromLongLong(before);
}

static PyObject* fast_get_tracer(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  PyObject* current = tracer != NULL ? tracer : Py_None;
  Py_INCREF(current);
  return current;
}

PyMethodDef pg_oprun_methods[] = {
    {"execute", (PyCFunction)(void (*)(void))fast_execute, METH_FASTCALL,
     "execute(op_name, inputs): the outputs of the op's remembered plan, or None when there "
     "is none (or it went stale)."},
    {"run_untaped", (PyCFunction)(void (*)(void))fast_run_untaped, METH_FASTCALL,
     "run_untaped(op_name, inputs, attrs): the op's outputs, run as execute and run do but "
     "never recorded on a gradient tape."},
    {"run", (PyCFunction)(void (*)(void))fast_run, METH_FASTCALL,
     "run(op_name, inputs): the op's first output, from its remembered plan or from "
     "dispatch.execute."},
    {"plan_key", (PyCFunction)(void (*)(void))fast_plan_key, METH_FASTCALL,
     "plan_key(op_name, inputs): the key plans are remembered under, or None when an input "
     "is not a Tensor."},
    {"bind_runtime", (PyCFunction)fast_bind_runtime, METH_O,
     "bind_runtime({name: address}): the runtime library's functions."},
    {"bind_tensors", (PyCFunction)fast_bind_tensors, METH_VARARGS,
     "bind_tensors(Tensor, DeviceBuffer, release, DType, device_scope, lost)."},
    {"bind_dispatch", (PyCFunction)fast_bind_dispatch, METH_VARARGS,
     "bind_dispatch(plans, settings, missed)."},
    {"bind_host_outputs", (PyCFunction)fast_bind_host_outputs, METH_VARARGS,
     "bind_host_outputs(make, free): the tensors of kernels' host-memory outputs."},
    {"bind_kernels", (PyCFunction)fast_bind_kernels, METH_VARARGS,
     "bind_kernels(registry, pending_deletes, flush_releases)."},
    {"set_tracer", (PyCFunction)fast_set_tracer, METH_O,
     "set_tracer(host tracer or None): record ops and frees while set."},
    {"record", (PyCFunction)fast_record, METH_O,
     "record(tuple): a host tracer record made in Python, kept in order with the C ones "
     "while a session runs (set_tracer); dropped otherwise."},
    {"next_correlation_id", (PyCFunction)fast_next_correlation_id, METH_NOARGS,
     "next_correlation_id(): a new launch id for the host tracer (PG_RUN_CORRELATION_ID)."},
    {"set_launch", (PyCFunction)fast_set_launch, METH_O,
     "set_launch(id): the correlation id of the op this thread runs next (0: none)."},
    {"launch", (PyCFunction)fast_launch, METH_NOARGS,
     "launch(): the correlation id set_launch gave this thread."},
    {"take_records", (PyCFunction)fast_take_records, METH_NOARGS,
     "take_records(): the host tracer's records since the last call, as tuples."},
    {"invalidate", (PyCFunction)fast_invalidate, METH_NOARGS,
     "invalidate(): plans and buffers check again whether their device, streams, kernels "
     "and allocator are still open (call it before closing or replacing any of them)."},
    {"hold_gil_bytes", (PyCFunction)(void (*)(void))fast_hold_gil_bytes, METH_FASTCALL,
     "hold_gil_bytes([n]): the most bytes of inputs and outputs a kernel run keeps the GIL "
     "for (default HOLD_GIL_BYTES), before the call; sets it to n when given (-1: none)."},
    {"get_tracer", (PyCFunction)fast_get_tracer, METH_NOARGS,
     "get_tracer(): the host tracer set_tracer set, or None."},
    {NULL, NULL, 0, NULL}};

static PyObject* intern(const char* s) { return PyUnicode_InternFromString(s); }

int pg_oprun_init(PyObject* module) {
  if (!(s_allocator = intern("_allocator")) || !(s_closed = intern("_closed")) ||
      !(s_handle = intern("_handle")) || !(s_deallocate_failed = intern("_deallocate_failed")) ||
      !(s_compute_stream = intern("compute_stream")) || !(s_generation = intern("generation")) ||
      !(s_event = intern("event")) || !(s_make_wait = intern("make_wait")) ||
      !(s_error = intern("_error")) || !(s_general = intern("general")) || !(s_kernel = intern("kernel")) ||
      !(s_executor = intern("executor")) || !(s_template = intern("template")) ||
      !(s_slots = intern("slots")) || !(s_n_out = intern("n_out")) ||
      !(s_tf_code = intern("tf_code")) || !(s_name = intern("name"))) {
    return -1;
  }
  if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&PlanType) < 0 ||
      PyType_Ready(&RawOpType) < 0) {
    return -1;
  }
  if (PyModule_AddIntConstant(module, "HOLD_GIL_BYTES", HOLD_GIL_BYTES) < 0) return -1;
  /* The layout of pluggable_KernelRun's request and output records (runtime_internal.h),
   * for the Python side that builds requests and reads outputs: one definition. */
  static const struct { const char* name; long long value; } layout[] = {
      {"PG_RUN_KERNEL", PG_RUN_KERNEL},           {"PG_RUN_STEP_ID", PG_RUN_STEP_ID},
      {"PG_RUN_OUT", PG_RUN_OUT},                 {"PG_RUN_OUT_CAPACITY", PG_RUN_OUT_CAPACITY},
      {"PG_RUN_STATUS", PG_RUN_STATUS},           {"PG_RUN_HEADER_WORDS", PG_RUN_HEADER_WORDS},
      {"PG_RUN_OUTPUT_HOST_MEMORY", PG_RUN_OUTPUT_HOST_MEMORY},
      {"PG_RUN_CORRELATION_ID", PG_RUN_CORRELATION_ID},
      {"PG_OUT_HEADER_WORDS", PG_OUT_HEADER_WORDS}, {"PG_OUT_OWNED", PG_OUT_OWNED},
      {"PG_OUT_HOST_MEMORY", PG_OUT_HOST_MEMORY},   {"PG_MAX_OUTPUT_DIMS", PG_MAX_OUTPUT_DIMS},
  };
  for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) {
    PyObject* value = PyLong_FromLongLong(layout[i].value);
    if (value == NULL || PyModule_AddObject(module, layout[i].name, value) < 0) {
      Py_XDECREF(value);
      return -1;
    }
  }
  Py_INCREF(&RawOpType);
  if (PyModule_AddObject(module, "RawOp", (PyObject*)&RawOpType) < 0) {
    Py_DECREF(&RawOpType);
    return -1;
  }
  Py_INCREF(&BufferType);
  if (PyModule_AddObject(module, "Buffer", (PyObject*)&BufferType) < 0) {
    Py_DECREF(&BufferType);
    return -1;
  }
  Py_INCREF(&PlanType);
  if (PyModule_AddObject(module, "Plan", (PyObject*)&PlanType) < 0) {
    Py_DECREF(&PlanType);
    return -1;
  }
  return 0;
}
