/* pluggable._compiled: the CPython extension module that keeps the per-op path, device memory and
 * the host profiler's hot loops in C. Each part (one .c file) contributes an init function and
 * a method table if it has module functions; module.c gathers them. The runtime library's
 * functions, and a plugin's, are reached through pointers that the ctypes side passes in (the
 * module links against nothing of ours, so it loads wherever libpluggable_runtime.so was
 * loaded from). */
#ifndef PLUGGABLE_FAST_INTERNAL_H_
#define PLUGGABLE_FAST_INTERNAL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "runtime_internal.h" /* TF_Status, PG_BFC and the runtime's calls */

/* Kinds of host tracer record (host_tracer.py: OP, COPY, ALLOC, FREE, ANNOTATION = range(5)):
 * oprun.c makes OP and FREE records, hostplane.c encodes all of them. */
enum { REC_OP, REC_COPY, REC_ALLOC, REC_FREE, REC_ANNOTATION, REC_KINDS };

/* The part that runs remembered ops (oprun.c). */
extern PyMethodDef pg_oprun_methods[];
int pg_oprun_init(PyObject* module);

/* What oprun.c shares with the other parts: the runtime's functions bind_runtime took, the
 * epoch that invalidate() bumps, whether a profiling session records, and the constructors of
 * device buffers and tensors (tensors.DeviceBuffer, tensors.Tensor). */
typedef struct {
  TF_Status* (*new_status)(void);
  void (*delete_status)(TF_Status*);
  const char* (*message)(const TF_Status*);
  int (*code)(const TF_Status*);
  void (*reset)(TF_Status*);
  void* (*bfc_allocate)(PG_BFC*, uint64_t);
  int (*claim_memory)(const void*, const SP_DeviceMemoryBase*, uint64_t, char*, size_t);
  void (*release_memory)(const void*, const void*);
} PgRuntime;
extern PgRuntime pg_runtime;
unsigned long long pg_epoch(void);
/* Whether a plugin call on `bytes` of data keeps the GIL (oprun.c's policy, see its top). */
int pg_keep_gil(long long bytes);
int pg_tracing(void);
PyObject* pg_make_buffer(PyObject* executor, long long nbytes, unsigned long long address,
                         PG_BFC* bfc);
PyObject* pg_make_tensor(PyObject* shape, PyObject* dtype, PyObject* device, PyObject* buffer);
PyTypeObject* pg_tensor_type(void);
/* 1 when remembered plans may be used (dispatch bound, a plan made, logging off), 0 when
 * not, -1 with an exception. */
int pg_plans_usable(void);
/* The outputs of the plan stored under `key` (dispatch._plans) run on the `n` tensors at
 * `items`, or None when there is no such plan or it went stale. */
PyObject* pg_run_plan(PyObject* key, PyObject* const* items, Py_ssize_t n, PyObject* op_name);
/* The outputs (a list) of the remembered plan of `op_name` on `inputs` with `attrs` (NULL or
 * None: none), else something that is not a list (the call ran nothing). */
PyObject* pg_plan_outputs(PyObject* op_name, PyObject* inputs, PyObject* attrs);
/* The current device scope (tensors.device_scope), a new reference. */
PyObject* pg_device_scope(void);
/* A tensor's (dtype code, shape, device), or None when a slot is unset. */
PyObject* pg_tensor_signature(PyObject* t);
/* The function address `functions[name]` (an integer), or NULL with a ValueError naming
 * `who` when it is missing, None or zero. */
void* pg_function_address(PyObject* functions, const char* name, const char* who);

/* Copies between host arrays and tensors without Python on the way (copies.c): a type, no
 * module functions. */
int pg_copies_init(PyObject* module);

/* Device memory from SP_StreamExecutor.allocate (memory.c): types, no module functions. */
int pg_memory_init(PyObject* module);

/* Python host callbacks and their pending count (hostcall.c): nonzero while any callback
 * handed to a plugin has not finished, when a kernel run must not keep the GIL. */
extern PyMethodDef pg_hostcall_methods[];
int pg_host_callbacks_pending(void);

/* The keys of calls with attributes or host values, and their runs (constplans.c). */
extern PyMethodDef pg_constplans_methods[];
/* The outputs (a list) of the remembered plan of `op_name` on `inputs` with `attrs` (a dict,
 * or NULL for none); else the call's key (a tuple), or None when it has none. */
PyObject* pg_execute_constants(PyObject* op_name, PyObject* inputs, PyObject* attrs);

/* Gradient tapes' recording (taperec.c): the recorder while a tape records in any thread,
 * else NULL (a borrowed reference: the one test an op pays when no tape records); and the
 * recorded run: the outputs of `op_name` on `inputs` with `attrs` (NULL: none). */
extern PyMethodDef pg_taperec_methods[];
PyObject* pg_tape_recorder(void);
PyObject* pg_record_on_tape(PyObject* op_name, PyObject* inputs, PyObject* attrs);

/* The ledger of a stream's writes (ledger.c): a type, no module functions. */
typedef struct {
  PyObject_HEAD
  uint64_t issued;       /* writes stamped so far */
  uint64_t good;         /* writes known done without error */
  uint64_t failed_after; /* once failed: writes above this count were lost */
  PyObject* failure;     /* NULL, or the failure's message (a str) */
} PgLedger;
extern PyTypeObject PgLedgerType;
int pg_ledger_init(PyObject* module);
/* A new reference to `stream._ledger`, or NULL with an exception naming `who`. */
PgLedger* pg_stream_ledger(PyObject* stream, const char* who);
/* Whether the write stamped `stamp` in `ledger` (NULL: none) was lost. */
static inline int pg_ledger_lost(const PgLedger* ledger, uint64_t stamp) {
  return ledger != NULL && ledger->failure != NULL && stamp > ledger->failed_after;
}
/* Stamps `buffer` (a Buffer) as written by work just enqueued on the stream of `ledger`. */
void pg_buffer_stamp(PyObject* buffer, PgLedger* ledger);

/* The host tracer's records as kept while a session runs (oprun.c), read in place by the
 * plane encoder: kind REC_OP (a: op name, b: plan or NULL for a failed run, c: fresh outputs
 * or NULL, n: correlation id), REC_FREE (a: the executor, n: bytes, end_ns unused) or
 * PG_RECORD_TUPLE (a: a Python hook's record tuple; ident and times unused). Times are
 * CLOCK_REALTIME nanoseconds. */
enum { PG_RECORD_TUPLE = -1 };
typedef struct {
  int kind;
  unsigned long ident;
  int64_t start_ns, end_ns;
  PyObject *a, *b, *c;
  long long n;
} PgRecordView;
/* Calls fn(ctx, record) for every record kept, oldest first, until it returns < 0 (then
 * returns that). The records stay kept (pg_records_clear drops them). */
int pg_records_visit(int (*fn)(void* ctx, const PgRecordView* record), void* ctx);
Py_ssize_t pg_records_count(void);
/* Records lost for want of memory since the store was last cleared. */
unsigned long long pg_records_lost(void);
void pg_records_clear(void);

/* The host tracer's plane encoder (hostplane.c). */
extern PyMethodDef pg_hostplane_methods[];
int pg_hostplane_init(PyObject* module);
/* pluggable.errors.InternalError (bind_errors): what a host bug or a plugin breaking the
 * kernel API's promises raises; NULL until pluggable.base.native binds it. */
extern PyObject* pg_internal_error;

/* A serialized XSpace's wire format, checked (xspacecheck.c). */
extern PyMethodDef pg_xspacecheck_methods[];
int pg_xspacecheck_init(PyObject* module);

/* Blocking plugin calls given up on at a deadline, on a pool of helper threads (blocking.c). */
extern PyMethodDef pg_blocking_methods[];
int pg_blocking_init(PyObject* module);
/* Other work on those helpers: `run(work)` on a helper thread, `work_free(work)` (may be NULL)
 * once the job's last holder lets go. A job is held by its caller and by the helper that runs
 * it: the caller starts it (0, or pthread_create's error: then pg_job_discard it), waits
 * (pg_job_wait releases the GIL: 1 done, 0 at `timeout` seconds after `started`, -1 when a
 * signal handler raised, with the exception set) and lets go with pg_job_release, whether it
 * finished or not. */
typedef struct PgJob PgJob;
/* An address argument of the function `who`: an int that fits a pointer, nonzero unless
 * `may_be_null`; -1 with a TypeError or ValueError naming `who` and `name` when not. */
int pg_address_argument(PyObject* value, const char* who, const char* name, void** out,
                        int may_be_null);
PgJob* pg_job_new(void (*run)(void*), void* work, void (*work_free)(void*));
int pg_job_start(PgJob* job, uint64_t* started);
int pg_job_wait(PgJob* job, uint64_t started, double timeout);
int pg_job_done(PgJob* job);
void pg_job_release(PgJob* job);
void pg_job_discard(PgJob* job);

#endif /* PLUGGABLE_FAST_INTERNAL_H_ */
