/* Declarations shared by the host runtime library's translation units, and the few functions
 * the Python host calls that are not part of TensorFlow's API. Plugins never see these. */
#ifndef PLUGGABLE_RUNTIME_INTERNAL_H_
#define PLUGGABLE_RUNTIME_INTERNAL_H_

#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes `s` OK again, dropping its message and payloads, so one status serves many calls. */
TF_CAPI_EXPORT void pluggable_ResetStatus(TF_Status* s);
/* Lends `s` for one plugin call: returns what to hand the plugin (a ticket naming `s` and
 * this lending, see status.c; `s` itself where tickets are not available). The TF_* status
 * functions accept the ticket until pluggable_SealStatus. */
TF_CAPI_EXPORT TF_Status* pluggable_LendStatus(TF_Status* s);
/* Ends the lending of `s` (given as itself or its ticket), resets it and seals it until it is
 * lent again: a write through the ticket of an ended lending (a plugin that kept the
 * TF_Status* of a call that returned) is refused and counted, however many calls later it
 * comes, never attributed to another call. */
TF_CAPI_EXPORT void pluggable_SealStatus(TF_Status* s);
/* The number of writes refused so far; the last one's code and message (n bytes, cut). */
TF_CAPI_EXPORT unsigned long long pluggable_LateStatusWrites(int* code, char* message, size_t n);

/* ---- plugins' log lines (logging.c) ----
 * Waits up to `timeout_ms` for the oldest queued line of TF_Log/TF_VLog: 1 with its Python
 * logging level and text (cut to `capacity`), 0 when none came. */
TF_CAPI_EXPORT int pluggable_WaitLogRecord(int* level, char* text, size_t capacity,
                                           int timeout_ms);
/* Lines dropped because the queue was full. */
TF_CAPI_EXPORT unsigned long long pluggable_LogRecordsDropped(void);

/* ---- per-thread caches of small objects (pool.c) ----------------------------------------
 * pg_pool_alloc returns uninitialised memory of `size` bytes (a recycled object of `kind`, or
 * malloc's); pg_pool_free takes it back. One size per kind. */
#include <stddef.h>

typedef enum PG_PoolKind { PG_POOL_TENSOR = 0, PG_POOL_BUFFER, PG_POOL_STATUS, PG_POOL_KINDS } PG_PoolKind;
void* pg_pool_alloc(PG_PoolKind kind, size_t size);
void pg_pool_free(PG_PoolKind kind, void* p);

/* ---- BFC allocator (bfc.c) ---------------------------------------------------------------
 * A best-fit-with-coalescing allocator over regions from a plugin's SP_StreamExecutor, as
 * TensorFlow's PluggableDevice uses; bfc.c's header comment describes the algorithm. Every
 * function accepts a NULL allocator (and does nothing, or reports failure). The SP_Device
 * and SP_StreamExecutor given to pluggable_BFCNew must outlive the allocator. */
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

typedef struct PG_BFC PG_BFC;

/* Where regions come from: SP_StreamExecutor.allocate (device memory, memory space 0) or
 * host_memory_allocate (pinned host memory). */
enum { PG_BFC_DEVICE = 0, PG_BFC_HOST = 1 };
/* ORed into `kind`: no pooling. Each allocation is a region of its own from the
 * sub-allocator (the request rounded up to 256 bytes) and goes back to it when freed, so the
 * plugin's allocate and deallocate see every allocation: a platform whose
 * SP_Platform.use_bfc_allocator is 0. Statistics and limits stay the allocator's. */
#define PG_BFC_EXACT 0x100

/* One chunk, as pluggable_BFCSnapshot reports it; `region` indexes regions by address. */
typedef struct PG_BFCChunkInfo {
  uint64_t address;
  uint64_t size;      /* bytes, a multiple of 256 */
  uint64_t requested; /* bytes asked for; 0 when free */
  int32_t in_use;
  int32_t region;
} PG_BFCChunkInfo;

/* A new allocator reserving at most `memory_limit` bytes (rounded down to 256). NULL with an
 * INVALID_ARGUMENT `status` for a bad kind, NULL pointers, missing callbacks or a limit under
 * 256 bytes. `name` (copied) labels descriptions and messages. */
TF_CAPI_EXPORT PG_BFC* pluggable_BFCNew(int kind, const SP_Device* device,
                                        const SP_StreamExecutor* se, uint64_t memory_limit,
                                        int allow_growth, const char* name, TF_Status* status);
/* Frees the allocator. With `return_regions`, gives every region back to the sub-allocator
 * (pass 0 once the device is destroyed: the plugin already took its memory back). Returns
 * the number of allocations still live, whose memory is gone with their regions. */
TF_CAPI_EXPORT int64_t pluggable_BFCDelete(PG_BFC* bfc, int return_regions);
/* `size` bytes, 256-aligned; NULL when out of memory, and for size 0 (treat 0 specially). */
TF_CAPI_EXPORT void* pluggable_BFCAllocate(PG_BFC* bfc, uint64_t size);
/* 0 when `ptr` was a live allocation (NULL is a no-op), nonzero (and nothing changes) for
 * any other pointer. */
TF_CAPI_EXPORT int pluggable_BFCDeallocate(PG_BFC* bfc, void* ptr);
/* Guard bytes after every device buffer the host allocates for a kernel (TF_AllocateOutput,
 * TF_ForwardInputOrAllocateOutput, TF_AllocateTemp), for the synchronise-after-every-op mode
 * (kernels.c): on or off for the process. */
TF_CAPI_EXPORT void pluggable_SetOutputGuards(int on);
/* Reads back the guards of the calling thread's last kernel run, once its device work is
 * done: writes what each kernel that wrote past the end of an output or a temporary did into
 * `report` (n bytes, cut and terminated) and returns its length (0: every guard intact);
 * forgets the run and gives back the temporaries its guards held. */
TF_CAPI_EXPORT size_t pluggable_CheckOutputGuards(char* report, size_t n);
/* The checks pluggable_BFCAllocate makes of a region, for a block SP_StreamExecutor.allocate
 * returned outside the allocator (StreamExecutor.allocate), for the platform whose allocate
 * function is `allocate_fn`: 1 when the block is usable (then
 * claimed as live memory of the platform until pluggable_ReleaseDeviceMemory), 0 when it is
 * refused and may go back to the plugin, -1 when refused and it must not (it overlaps live
 * memory); why it was refused in `why` (n bytes). */
TF_CAPI_EXPORT int pluggable_ClaimDeviceMemory(const void* allocate_fn,
                                               const SP_DeviceMemoryBase* mem, uint64_t bytes,
                                               char* why, size_t n);
TF_CAPI_EXPORT void pluggable_ReleaseDeviceMemory(const void* allocate_fn, const void* opaque);
/* The same checks for a block of host-addressable memory that `call` (host_memory_allocate,
 * unified_memory_allocate) returned at `address` for `bytes`, against the live blocks of key
 * `key` (the platform's first of those two functions): 1 usable (claimed until
 * pluggable_ReleaseHostMemory), 0 refused, -1 refused and not to be given back. */
TF_CAPI_EXPORT int pluggable_ClaimHostMemory(const void* key, const char* call,
                                             const void* address, uint64_t bytes, char* why,
                                             size_t n);
TF_CAPI_EXPORT void pluggable_ReleaseHostMemory(const void* key, const void* address);
/* Why the last pluggable_BFCAllocate that failed refused a block the plugin handed out (its
 * size, alignment, or an overlap with live memory of the platform), into buf (n bytes, cut
 * and terminated); returns the full length, 0 when the failure refused no block. */
TF_CAPI_EXPORT size_t pluggable_BFCRefusal(PG_BFC* bfc, char* buf, size_t n);
/* The chunk size (request rounded up to 256) of a live allocation, 0 for anything else. */
TF_CAPI_EXPORT uint64_t pluggable_BFCAllocatedSize(PG_BFC* bfc, const void* ptr);
/* Fills the fields of `stats` that end within stats->struct_size. */
TF_CAPI_EXPORT void pluggable_BFCGetStats(PG_BFC* bfc, SP_AllocatorStats* stats);
/* peak_bytes_in_use = bytes_in_use, peak_bytes_reserved = bytes_reserved. */
TF_CAPI_EXPORT void pluggable_BFCResetPeak(PG_BFC* bfc);
/* Returns every completely free region to the sub-allocator; the bytes released. */
TF_CAPI_EXPORT uint64_t pluggable_BFCReleaseFreeRegions(PG_BFC* bfc);
/* A human summary (limit, use, regions, largest free chunk, chunks per non-empty size
 * class) into buf; returns the length it needs, like snprintf. */
TF_CAPI_EXPORT size_t pluggable_BFCDescribe(PG_BFC* bfc, char* buf, size_t n);
/* 0 when every invariant holds; otherwise 1 and the first violation in `err`. */
TF_CAPI_EXPORT int pluggable_BFCCheck(PG_BFC* bfc, char* err, size_t n);
/* Writes up to `capacity` chunks (regions by address, chunks by address) into `out`;
 * returns how many there are. */
TF_CAPI_EXPORT size_t pluggable_BFCSnapshot(PG_BFC* bfc, PG_BFCChunkInfo* out,
                                            size_t capacity);


/* ---- Kernels (kernels.c, tensor.c) ---------------------------------------------------------
 * The host side of TensorFlow's kernel C API (tensorflow/c/kernels.h). Plugins register
 * kernels from their TF_InitKernel with TF_NewKernelBuilder + TF_RegisterKernelBuilder; the
 * host finds them in the registry below, makes kernel instances (the plugin's create_func)
 * and runs them (compute_func) with pluggable_KernelRun.
 *
 * Registry. Registrations are numbered 0, 1, 2, ... in the order they were made and are never
 * removed (plugins are never unloaded), so an id and every pointer a PG_KernelInfo holds stay
 * valid for the life of the process. A registration equal to an earlier one is an ordinary
 * registration, as in TensorFlow. One that failed (a malformed builder,
 * TF_RegisterKernelBuilderWithKernelDef with a KernelDef) is kept too, with its error and
 * never enabled, so that the host can tell the user. Thread-safe. */
#include "tensorflow/c/tf_datatype.h"

/* Attributes registrations made until pluggable_EndKernelRegistration to `source` (copied;
 * the host passes the plugin's path) — call it around a plugin's TF_InitKernel. Sessions do
 * not nest: a second Begin replaces the source. */
TF_CAPI_EXPORT void pluggable_BeginKernelRegistration(const char* source);
/* Ends the session; returns how many registrations (failed ones included) it made. */
TF_CAPI_EXPORT int64_t pluggable_EndKernelRegistration(void);
/* Number of registrations so far; ids are 0 .. count - 1. */
TF_CAPI_EXPORT int64_t pluggable_KernelRegistrationCount(void);

typedef struct PG_KernelInfo {
  size_t struct_size;        /* set by the caller: PG_KERNEL_INFO_STRUCT_SIZE */
  const char* op;            /* "" when the plugin passed NULL */
  const char* device_type;
  const char* kernel_name;
  const char* label;         /* "" without TF_KernelBuilder_Label */
  const char* source;        /* as given to pluggable_BeginKernelRegistration; "" outside one */
  int32_t priority;
  int32_t is_async;          /* made with TF_NewAsyncKernelBuilder */
  int32_t enabled;           /* 1 when the host may use it */
  int32_t error_code;        /* TF_OK, or the TF_Code the plugin's status got */
  const char* error_message; /* "" when error_code is TF_OK */
  int32_t num_constraints;   /* type constraints, one per attribute */
  const char* const* constraint_attrs;     /* [num_constraints] attribute names */
  const int32_t* constraint_num_types;     /* [num_constraints] */
  const TF_DataType* const* constraint_types; /* [i][constraint_num_types[i]], in order */
  int32_t num_host_memory_args;
  const char* const* host_memory_args;     /* input/output argument names in host memory */
} PG_KernelInfo;
#define PG_KERNEL_INFO_STRUCT_SIZE TF_OFFSET_OF_END(PG_KernelInfo, host_memory_args)

/* Fills `info` (fields ending within info->struct_size); 0, or -1 for an unknown id. */
TF_CAPI_EXPORT int pluggable_KernelRegistrationInfo(int64_t id, PG_KernelInfo* info);
/* What the host indexes registrations by, for ids start .. end - 1 at once: per registration
 * five NUL-terminated strings, op, device type, source, error code and enabled (decimal).
 * Returns the bytes they take, written to `buffer` only when that is at most `capacity`
 * (pass 0 to ask); -1 when the range is not one of registrations. */
TF_CAPI_EXPORT int64_t pluggable_KernelRegistrationKeys(int64_t start, int64_t end,
                                                        char* buffer, int64_t capacity);
/* Enables (1) or disables (0) a registration; 0, or -1 for an unknown id or for enabling a
 * registration that failed. A disabled registration cannot be instantiated; instances made
 * earlier keep working. */
TF_CAPI_EXPORT int pluggable_KernelRegistrationSetEnabled(int64_t id, int enabled);

/* ---- kernel instances ----
 * Attribute values a kernel's create_func reads with TF_OpKernelConstruction_GetAttr*. */
enum { PG_ATTR_INT = 0, PG_ATTR_FLOAT = 1, PG_ATTR_BOOL = 2, PG_ATTR_TYPE = 3,
       PG_ATTR_STRING = 4 };

typedef struct PG_Attr {
  const char* name;
  int32_t kind;    /* PG_ATTR_* */
  int32_t is_list;
  int64_t count;   /* number of values: 1 for a scalar, the length for a list */
  /* int: int64_t[count]; float: float[count]; bool: TF_Bool[count];
   * type: int32_t[count] (TF_DataType values); string: const char*[count] */
  const void* values;
  const uint64_t* lengths; /* string: byte length of each value (no NUL needed) */
} PG_Attr;

typedef struct PG_Kernel PG_Kernel;

/* A kernel instance of registration `id` for node `node_name`, with `attrs` (all copied).
 * Calls the plugin's create_func; if that reports failure (TF_OpKernelConstruction_Failure)
 * calls delete_func on what it returned, as TensorFlow does, and returns NULL with the
 * plugin's status. NULL with INVALID_ARGUMENT for an unknown id, duplicate or malformed
 * attributes, FAILED_PRECONDITION for a disabled or failed registration. */
TF_CAPI_EXPORT PG_Kernel* pluggable_KernelCreate(int64_t id, const char* node_name,
                                                 const PG_Attr* attrs, int32_t num_attrs,
                                                 TF_Status* status);
/* Calls the plugin's delete_func and frees the instance. NULL is a no-op. Must not run
 * while a pluggable_KernelRun of the instance is in progress. */
TF_CAPI_EXPORT void pluggable_KernelDelete(PG_Kernel* kernel);

/* Marks the plugin library `source` stuck (a call was abandoned inside it; `reason` says which
 * call): its kernels are neither created, run nor deleted again. The first reason is kept. */
TF_CAPI_EXPORT void pluggable_MarkPluginStuck(const char* source, const char* reason);
/* The length of the reason `source` is stuck, copied (cut to fit) into buf; 0 if it is not. */
TF_CAPI_EXPORT size_t pluggable_PluginStuckReason(const char* source, char* buf, size_t n);

/* ---- running a kernel ----
 * One call per execution: pluggable_KernelRun(request). `request` is a flat array of
 * int64_t words (pointers as integers), so that a host fills it in one step and the foreign
 * call has a single argument:
 *
 *   header      PG_RUN_HEADER_WORDS words, indexed by PG_RUN_*
 *   outputs     num_outputs words: the TF_DataType output i must have, ORed with
 *               PG_RUN_OUTPUT_HOST_MEMORY when output i lives in host memory
 *   inputs      per input: data, nbytes, dtype, host_memory (0/1), num_dims, dims[num_dims]
 *
 * Input data is borrowed for the duration of the call: the kernel sees it through
 * TF_GetInput (data is device memory unless host_memory is set); the request itself must
 * stay unchanged during the call. On success the `out` array of the header receives, per
 * output, PG_OUT_HEADER_WORDS words indexed by PG_OUT_* followed by its dims; an output is
 * one of:
 *   - owned (PG_OUT_OWNED): fresh memory the caller now owns: device memory from the run's
 *     BFC allocator (free with pluggable_BFCDeallocate) or, with PG_OUT_HOST_MEMORY, host
 *     memory (free with pluggable_FreeHostMemory);
 *   - an alias of input `aliased_input` (the kernel passed TF_SetOutput a view of that
 *     input): the address lies inside that input's memory, nothing to free;
 *   - empty (no elements): address 0, nbytes 0, aliased_input -1, not owned.
 * An output the kernel shares with a tensor it keeps (or wrapped with TF_NewTensor) is
 * copied into fresh memory, on the run's stream for device memory.
 * Returns the TF_Code; on failure the header's `status` holds the kernel's (or the host's)
 * message, every output allocated during the call has been freed, and `out` is
 * unspecified. The kernel's own failures (TF_OpKernelContext_Failure, an unimplemented
 * function) come back unchanged; an output the kernel never set is TF_INTERNAL, naming the
 * output.
 *
 * Memory the kernel frees during the call (temporaries, replaced outputs) goes back to the
 * BFC allocator at once: device work enqueued later on the same compute stream is the only
 * work that can reuse it (TensorFlow's stream-ordered rule), so the host must run every
 * kernel of a device on one compute stream, or order streams itself.
 *
 * A run with no device (PG_RUN_DEVICE 0) is a run on the CPU, as TensorFlow runs a kernel
 * registered for DEVICE_CPU: every input, output and temporary is host memory, and
 * TF_GetStream fails with TF_FAILED_PRECONDITION (the CPU has no stream).
 *
 * Cheap: no allocation by the host for up to PG_RUN_INLINE_ARGS inputs and outputs. Several
 * threads may run kernels (the same instance too) at once. */
enum {
  PG_RUN_KERNEL = 0,          /* PG_Kernel* */
  PG_RUN_DEVICE,              /* const SP_Device*; 0 for a run on the CPU */
  PG_RUN_STREAM_EXECUTOR,     /* const SP_StreamExecutor* (for copies of shared outputs) */
  PG_RUN_STREAM,              /* SP_Stream, what TF_GetStream returns */
  PG_RUN_ALLOCATOR,           /* PG_BFC* for device outputs and temporaries */
  PG_RUN_DEVICE_ID,           /* TF_GetDeviceId */
  PG_RUN_STEP_ID,             /* TF_StepId */
  PG_RUN_NUM_INPUTS,
  PG_RUN_NUM_OUTPUTS,
  PG_RUN_OUT,                 /* int64_t* out: the output records */
  PG_RUN_OUT_CAPACITY,        /* words of `out` */
  PG_RUN_STATUS,              /* TF_Status*: the error, when the call fails */
  PG_RUN_CORRELATION_ID,      /* the profiler's id of this launch (0: none), see below */
  PG_RUN_HEADER_WORDS
};
#define PG_RUN_OUTPUT_HOST_MEMORY ((int64_t)1 << 32)
#define PG_RUN_INLINE_ARGS 8

enum {
  PG_OUT_ADDRESS = 0,
  PG_OUT_NBYTES,
  PG_OUT_DTYPE,
  PG_OUT_FLAGS,               /* PG_OUT_OWNED | PG_OUT_HOST_MEMORY */
  PG_OUT_ALIASED_INPUT,       /* -1 unless an alias */
  PG_OUT_NUM_DIMS,
  PG_OUT_HEADER_WORDS         /* then num_dims words */
};
#define PG_OUT_OWNED 1
#define PG_OUT_HOST_MEMORY 2
/* Outputs have at most this many dimensions (TensorFlow's TensorShape limit), so
 * num_outputs * (PG_OUT_HEADER_WORDS + PG_MAX_OUTPUT_DIMS) words always suffice. */
#define PG_MAX_OUTPUT_DIMS 254

TF_CAPI_EXPORT int pluggable_KernelRun(const int64_t* request);

struct TF_OpKernelContext;
/* PLUGGABLE_ProfilerContextExt.correlation_id: the PG_RUN_CORRELATION_ID of the run `ctx`
 * belongs to (0 for NULL). */
TF_CAPI_EXPORT uint64_t pluggable_KernelCorrelationId(struct TF_OpKernelContext* ctx);

/* Frees host memory the runtime handed over (host-memory outputs). NULL is a no-op. */
TF_CAPI_EXPORT void pluggable_FreeHostMemory(void* data);

/* ---- DLPack capsules the host exports (dlpack.c) ---------------------------------------- */
/* Looks up the Python C API in the process and keeps `release`, which the deleter calls with
 * the managed tensor's address. 0 on success, -1 when something is missing. */
TF_CAPI_EXPORT int pluggable_DLPackInit(void (*release)(void* managed));
/* The deleter of exported managed tensors: takes the GIL, sets a pending exception aside,
 * calls `release`, restores both. Safe from any thread and during exception handling. */
TF_CAPI_EXPORT void pluggable_DLPackDeleter(void* managed);
/* The PyCapsule destructor of exported capsules: deletes a tensor no consumer took. */
TF_CAPI_EXPORT void pluggable_DLPackCapsuleDestructor(void* capsule);
/* ---- Ops registered by plugins (ops.c) -----------------------------------------------------
 * Plugins register ops with tensorflow/c/ops.h (usually from TF_InitKernel). Registrations
 * are numbered 0, 1, ... and never removed; the specs are kept as the plugin wrote them. */
enum { PG_OP_COMMUTATIVE = 1, PG_OP_AGGREGATE = 2, PG_OP_STATEFUL = 4,
       PG_OP_ALLOWS_UNINITIALIZED_INPUT = 8 };

typedef struct PG_OpInfo {
  const char* name;
  int32_t num_attrs;
  const char* const* attrs;   /* "name: kind [= default]" */
  int32_t num_inputs;
  const char* const* inputs;  /* "name: type" */
  int32_t num_outputs;
  const char* const* outputs;
  int32_t flags;              /* PG_OP_* */
  int32_t has_shape_fn;
  int32_t deprecated_version; /* 0: not deprecated */
  const char* deprecation;
} PG_OpInfo;

TF_CAPI_EXPORT int64_t pluggable_OpRegistrationCount(void);
/* Op names compared while registering ops so far: registration's cost, for tests. */
TF_CAPI_EXPORT int64_t pluggable_OpNameComparisons(void);
/* Fills `info` (pointers stay valid for the life of the process); 0, or -1 for a bad id. */
TF_CAPI_EXPORT int pluggable_OpRegistrationInfo(int64_t id, PG_OpInfo* info);

/* out_ranks[i] when the shape function did not set output i. */
#define PG_SHAPE_NOT_SET (-2)
/* Runs op `id`'s shape function. Inputs: ranks[num_inputs] (-1: unknown) and their dims
 * one after the other in `dims` (-1: unknown size); the type attributes by name. Outputs:
 * out_ranks[num_outputs] (-1 unknown, PG_SHAPE_NOT_SET) and the dims of the outputs with a
 * known rank, one after the other, in out_dims. Returns the TF_Code, the shape function's
 * error in `status`. Without a shape function every output is PG_SHAPE_NOT_SET. */
TF_CAPI_EXPORT int pluggable_OpInferShapes(int64_t id, int32_t num_inputs, const int64_t* ranks,
                                           const int64_t* dims, int32_t num_type_attrs,
                                           const char* const* type_attr_names,
                                           const int32_t* type_attr_values, int32_t num_outputs,
                                           int64_t* out_ranks, int64_t* out_dims,
                                           int64_t out_dims_capacity, TF_Status* status);

/* ---- Resource variables (kernels_experimental.c) ------------------------------------------
 * A variable is a dtype, a lock and a value: a TF_Tensor over memory of one device's BFC
 * allocator (or host memory for the CPU), absent until the first assignment. A kernel sees
 * it as a DT_RESOURCE input in host memory whose 8 bytes hold the PG_Variable*, and works on
 * it through kernels_experimental.h; the host makes, reads and writes it with the functions
 * below. All of them are thread-safe except Delete, which must be the last call. */
typedef struct PG_Variable PG_Variable;

/* A new, uninitialized variable of `dtype` whose memory comes from `bfc` (NULL: aligned host
 * memory). `name` (copied) appears in messages. NULL when out of host memory. */
TF_CAPI_EXPORT PG_Variable* pluggable_VariableNew(const char* name, TF_DataType dtype,
                                                  PG_BFC* bfc, int device_id);
/* Frees the variable. With `release_memory` 0 (the device is gone and took its memory
 * back), the value's bytes are forgotten instead of returned to the allocator. */
TF_CAPI_EXPORT void pluggable_VariableDelete(PG_Variable* var, int release_memory);
/* Holds the variable's lock across several host calls (the Info/Allocate calls below do not
 * lock; kernels wait meanwhile). */
TF_CAPI_EXPORT void pluggable_VariableLock(PG_Variable* var);
TF_CAPI_EXPORT void pluggable_VariableUnlock(PG_Variable* var);
/* The value: returns its rank (dims written up to `capacity`), its bytes and their size;
 * -1 when uninitialized. Call with the lock held. */
TF_CAPI_EXPORT int pluggable_VariableInfo(PG_Variable* var, int64_t* dims, int capacity,
                                          void** data, uint64_t* nbytes);
/* The value's shape, under the variable's lock (taken and given back here): returns its rank
 * (dims written up to `capacity`), -1 when uninitialized. Call without the lock. */
TF_CAPI_EXPORT int pluggable_VariableShape(PG_Variable* var, int64_t* dims, int capacity);
/* Replaces the value with fresh, unset memory of the variable's dtype and shape `dims`;
 * returns its address (NULL for an empty shape, with OK), NULL with an error in `status`
 * when out of memory. The old memory goes back to the allocator: the host must order its
 * writes to the new memory after earlier work, as kernels do (compute-stream order). Call
 * with the lock held. */
TF_CAPI_EXPORT void* pluggable_VariableAllocate(PG_Variable* var, const int64_t* dims,
                                                int num_dims, TF_Status* status);

/* ---- c_api.c: what the op library and the kernel registry answer ------------------------ */

/* The host's answer to one question a plugin asks through TensorFlow's C API: a new TF_Buffer
 * (the caller deletes it) holding a serialized OpList (PG_QUERY_OP_LIST), KernelList
 * (PG_QUERY_KERNELS_FOR_OP of op `name`, PG_QUERY_ALL_KERNELS) or one byte 0 or 1
 * (PG_QUERY_OP_IS_STATEFUL of op `name`); NULL with `status` set on failure (an unknown op is
 * TF_NOT_FOUND). Python installs it (pluggable.kernels.c_api); any thread may call it. */
enum { PG_QUERY_OP_LIST = 1, PG_QUERY_KERNELS_FOR_OP = 2, PG_QUERY_ALL_KERNELS = 3,
       PG_QUERY_OP_IS_STATEFUL = 4 };
typedef void* (*PG_HostQuery)(int what, const char* name, TF_Status* status);
TF_CAPI_EXPORT void pluggable_SetHostQuery(PG_HostQuery query);

/* TensorFlow's own declarations of these are in its c_api.h and c_api_experimental.h,
 * which include/ does not reproduce (include/ABI.md, "Functions of TensorFlow's client
 * API"); plugins built against TensorFlow import them. */
TF_CAPI_EXPORT const char* TF_Version(void);
TF_CAPI_EXPORT TF_Buffer* TF_GetAllOpList(void);
TF_CAPI_EXPORT TF_Buffer* TF_GetRegisteredKernelsForOp(const char* name, TF_Status* status);
TF_CAPI_EXPORT TF_Buffer* TF_GetAllRegisteredKernels(TF_Status* status);
TF_CAPI_EXPORT int TF_OpIsStateful(const char* op_type, TF_Status* status);
TF_CAPI_EXPORT unsigned char TF_GetXlaAutoJitEnabled(void);
typedef struct TF_Tensor TF_Tensor;
TF_CAPI_EXPORT void TF_TensorFromProto(const TF_Buffer* from, TF_Tensor* to,
                                       TF_Status* status); /* tensor_proto.c */

#ifdef __cplusplus
}
#endif

#endif
