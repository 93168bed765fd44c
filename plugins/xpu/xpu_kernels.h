/* xpu_kernels.h: what the XPU kernel files (xpu_kernels*.c) share: shapes, NumPy
 * broadcasting, the compute()-time helpers around TensorFlow's kernel C API, attribute
 * readers, registration tables and the GEMM engine.
 *
 * Every kernel follows the same pattern. create() reads the node's attributes (an op-specific
 * create function per op, since TensorFlow's create callback does not say which op it is
 * for). compute() opens an XpuCompute (counts the `kernel` fault kind, fetches the inputs),
 * validates shapes and host-memory arguments synchronously, allocates the outputs, packs
 * everything the device work needs (pointers, shapes, attribute values) into one struct on
 * its stack and hands it to xpu_compute_enqueue_work, which checks the stream and the device
 * buffers and copies the struct into a recycled record of the stream (work that owns heap
 * arrays goes as a heap argument through xpu_compute_enqueue); the worker runs it later.
 * compute() does not wait for the stream, except in a host without kernels_experimental.h's
 * variable functions (launch blocking, xpu_kernels_register.c). Hidden like everything else
 * in xpu_internal.h.
 */
#ifndef XPU_KERNELS_H_
#define XPU_KERNELS_H_

#include "xpu_internal.h"

#include "tensorflow/c/tf_datatype.h"
#include "tensorflow/c/tf_tensor.h"

/* The kernel API's opaque types. Only xpu_kernels_api.c includes tensorflow/c/kernels.h:
 * TensorFlow's copy defines a const object (TF_InputRange_Args_STRUCT_SIZE) in every C file
 * that includes it, which would clash at link time; the kernel files reach the kernel API
 * through the helpers below. (Repeating a typedef is valid C11.) */
typedef struct TF_OpKernelConstruction TF_OpKernelConstruction;
typedef struct TF_OpKernelContext TF_OpKernelContext;

/* The kernel entry point (xpu_kernels_register.c), as kernels.h declares it; declared here
 * for the file that defines it, which does not include kernels.h. */
void TF_InitKernel(void);

#pragma GCC visibility push(hidden)

/* Highest tensor rank the kernels accept (TensorFlow allows 254; more is INVALID_ARGUMENT). */
#define XPU_MAX_RANK 64
/* Work is split into tasks of about this many elements for the helper-thread pool, from
 * twice this many on (element-wise kernels: from XPU_ELEMENTWISE_SPLIT elements on, see
 * xpu_parallel_elements). */
#define XPU_PARALLEL_GRAIN 32768

/* ---- dtypes (xpu_kernels_dtypes.c) ------------------------------------------------------ */

/* Bytes per element of the fixed-size types the kernels handle; 0 for others. */
size_t xpu_dtype_size(TF_DataType dt);
/* "float", "int32", ... for messages. */
const char* xpu_dtype_name(TF_DataType dt);

/* Type lists for the registration tables (XpuKernelDef.types below), each terminated by 0
 * (not a valid TF_DataType). */
extern const TF_DataType xpu_types_F[];     /* float, double */
extern const TF_DataType xpu_types_N[];     /* float, double, int32, int64 */
extern const TF_DataType xpu_types_NB[];    /* N + bool */
extern const TF_DataType xpu_types_CAST[];  /* bool, int32, int64, float, double, half, bfloat16 */
extern const TF_DataType xpu_types_FIXED[]; /* every fixed-size type (Identity) */
extern const TF_DataType xpu_types_MATMUL[];/* float, double, int32, int64 */

/* ---- shapes and NumPy broadcasting (xpu_kernels_broadcast.c) ---------------------------- */

typedef struct XpuShape {
  int rank;
  int64_t dims[XPU_MAX_RANK];
  int64_t count; /* product of dims; 1 for a scalar */
} XpuShape;

/* Up to three operands broadcast to one output, with the output's dims collapsed: dims of
 * size 1 dropped and neighbouring dims merged where every operand is either contiguous over
 * both or broadcast over both. strides[k][d] is operand k's element stride along collapsed
 * dim d (0 where it is broadcast); the innermost stride is 0 or 1. */
typedef struct XpuBroadcast {
  int operands;
  int rank; /* collapsed; 0 for a scalar output */
  int64_t dims[XPU_MAX_RANK];
  int64_t strides[3][XPU_MAX_RANK];
  int64_t count; /* output elements */
} XpuBroadcast;

/* True when two shapes have the same rank and dims. */
bool xpu_same_shape(const XpuShape* a, const XpuShape* b);

/* NumPy broadcasting of `n` (1..3) shapes into *out_shape and *bc; false when some dim
 * neither matches nor is 1. */
bool xpu_broadcast(int n, const XpuShape* const* shapes, XpuShape* out_shape, XpuBroadcast* bc);

/* Called for each run of output elements [out, out + count) that is contiguous in the output;
 * offs[k] is operand k's element offset at the run's start and inner[k] its stride (0 or 1)
 * within the run. Returns false to report an error (the walk goes on). */
typedef bool (*XpuBroadcastRun)(void* ctx, const int64_t* offs, const int64_t* inner,
                                int64_t out, int64_t count);
/* Walks output elements [begin, end) of `bc` in order, in runs; false if a run failed. */
bool xpu_broadcast_walk(const XpuBroadcast* bc, int64_t begin, int64_t end, XpuBroadcastRun run,
                        void* ctx);

/* Formats a shape as "[2,3]" into buf (truncated with "..." when too long). */
const char* xpu_shape_str(const XpuShape* s, char* buf, size_t size);

/* ---- task splitting (xpu_kernels_tasks.c) ----------------------------------------------- */

/* Splits [0, count) into tasks of about `grain` items (one task when count < 2 * grain), the
 * same for any number of threads; xpu_task_range gives task t's [begin, end). */
int64_t xpu_task_count(int64_t count, int64_t grain);
/* Runs range(ctx, begin, end) over [0, count) of an element-wise kernel: one call below
 * XPU_ELEMENTWISE_SPLIT elements (xpu_internal.h), else an even number of calls (at least
 * two) on slices of at least XPU_PARALLEL_GRAIN elements, as tasks for the pool. */
void xpu_parallel_elements(int64_t count, void (*range)(void* ctx, int64_t begin, int64_t end),
                           void* ctx);
void xpu_task_range(int64_t count, int64_t tasks, int64_t t, int64_t* begin, int64_t* end);

/* ---- compute() helpers (xpu_kernels_api.c) ---------------------------------------------- */

/* Inputs and outputs held inside XpuCompute; ops with more (ConcatV2, Pack, AddN, Split)
 * get heap arrays for the call. */
#define XPU_INLINE_KERNEL_INPUTS 4
#define XPU_INLINE_KERNEL_OUTPUTS 2
/* At most this many inputs or outputs per call (TensorFlow has no limit; more is
 * INVALID_ARGUMENT before anything is allocated). */
#define XPU_MAX_KERNEL_ARGS 4096
/* At most this many inputs for ops whose inputs are all named (xpu_compute_begin). */
#define XPU_MAX_NAMED_INPUTS 16

/* One compute() call in progress. */
typedef struct XpuCompute {
  TF_OpKernelContext* ctx;
  const char* op;
  TF_Status* status;
  int input_count;
  const char* const* in_name; /* the op's input names, for messages */
  const char* list_name;      /* with xpu_compute_begin_list: the name of the list input */
  int list_count;             /* ... and its length (inputs [0, list_count)) */
  TF_Tensor** in;
  XpuShape* in_shape;
  bool* in_host; /* host-memory input: not a device buffer */
  int output_count;
  int output_capacity;
  TF_Tensor** out;
  bool failed;
  TF_Tensor* in_inline[XPU_INLINE_KERNEL_INPUTS];
  XpuShape in_shape_inline[XPU_INLINE_KERNEL_INPUTS];
  bool in_host_inline[XPU_INLINE_KERNEL_INPUTS];
  TF_Tensor* out_inline[XPU_INLINE_KERNEL_OUTPUTS];
} XpuCompute;

/* Starts compute() of `op` with the inputs named in `names` (NULL-terminated; host_mask bit
 * i: input i is a host-memory input): counts the `kernel` fault kind, fetches the inputs and
 * their shapes. False (after reporting the failure through TF_OpKernelContext_Failure) when
 * compute() must stop; call xpu_compute_end in every case. */
bool xpu_compute_begin(XpuCompute* c, TF_OpKernelContext* ctx, const char* op,
                       const char* const* names, unsigned host_mask);
/* As xpu_compute_begin for an op whose first inputs are one list (N tensors named
 * `list_name`, N >= min_list) followed by the inputs named in `tail` (NULL-terminated; bit i
 * of tail_host_mask: tail input i is in host memory). c->list_count = N. */
bool xpu_compute_begin_list(XpuCompute* c, TF_OpKernelContext* ctx, const char* op,
                            const char* list_name, int min_list, const char* const* tail,
                            unsigned tail_host_mask);
/* Makes room for `count` outputs (needed above XPU_INLINE_KERNEL_OUTPUTS); false after
 * failing. */
bool xpu_reserve_outputs(XpuCompute* c, int count);
/* Releases the tensors and the status. */
void xpu_compute_end(XpuCompute* c);
/* Fails compute() with `code` and a message; always returns false. */
bool xpu_fail(XpuCompute* c, TF_Code code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks input i's dtype (e.g. against the T attribute); false after failing. */
bool xpu_check_dtype(XpuCompute* c, int i, TF_DataType want);
/* Allocates output i; false after failing. Its data pointer is xpu_data(c->out[i]). */
bool xpu_alloc_output(XpuCompute* c, int i, TF_DataType dt, const XpuShape* shape);
/* Like xpu_alloc_output, but output i may take the buffer of one of the inputs `candidates`
 * (TF_ForwardInputOrAllocateOutput), which must have its type and shape: TensorFlow requires
 * it of the kernels it runs in place (the merge op of a collective all-reduce); elsewhere it
 * saves an allocation when the host allows it. */
bool xpu_alloc_output_in_place(XpuCompute* c, int i, TF_DataType dt, const XpuShape* shape,
                               const int* candidates, int candidate_count);
/* Makes output `output` the input tensor `input` itself (no copy); false after failing. */
bool xpu_forward_input(XpuCompute* c, int input, int output);
/* Reads host-memory integer input i (int32 or int64, scalar or vector) into vals (at most
 * `max`), *n = element count; false after failing. */
bool xpu_host_ints(XpuCompute* c, int i, int64_t* vals, int max, int* n);
/* Queues fn(arg) on the kernel's stream (TF_GetStream), after checking that the device
 * inputs and outputs lie in the stream's device memory. Takes ownership of arg (free_arg or
 * free). With fn == NULL (nothing to compute: empty outputs) only the stream is checked. */
bool xpu_compute_enqueue(XpuCompute* c, XpuStreamFn fn, void* arg, void (*free_arg)(void*));
/* Like xpu_compute_enqueue, but `work` (any struct, usually on the caller's stack) is copied
 * into a per-stream recycled buffer (xpu_stream_enqueue_work): no heap block per op. */
bool xpu_compute_enqueue_work(XpuCompute* c, XpuStreamFn fn, const void* work, size_t size);

/* As xpu_compute_enqueue_work, with `extra` device ranges checked too (variables' buffers). */
bool xpu_compute_enqueue_work_extra(XpuCompute* c, XpuStreamFn fn, const void* work,
                                    size_t size, const XpuDeviceRange* extra,
                                    size_t extra_count);

static inline void* xpu_data(const TF_Tensor* t) { return TF_TensorData(t); }

/* ---- resource variables (xpu_kernels_api.c, over tensorflow/c/kernels_experimental.h) --- */

typedef struct TF_VariableInputLockHolder TF_VariableInputLockHolder;
/* True when the host exports the variable functions below (pluggable does; TensorFlow 2.21's
 * packages do not): only then are the variable kernels registered. */
bool xpu_host_has_variable_api(void);
/* The callbacks TensorFlow's variable functions take: copy source into dest, and
 * tensor op= value (op 0: add, 1: subtract); both enqueue their work on the kernel's stream. */
typedef void (*XpuVarCopyFn)(TF_OpKernelContext* ctx, TF_Tensor* source, TF_Tensor* dest);
typedef void (*XpuVarUpdateFn)(TF_OpKernelContext* ctx, TF_Tensor* tensor, TF_Tensor* value,
                               int op);
/* TF_AssignVariable / TF_AssignUpdateVariable (not a variant) / TF_MaybeLockVariable-
 * InputMutexesInOrder (dense) / TF_GetInputTensorFromVariable (dense, not a variant): false
 * with the host's status in `status` when they fail. */
bool xpu_var_assign(TF_OpKernelContext* ctx, int input, int value, bool validate_shape,
                    XpuVarCopyFn copy, TF_Status* status);
bool xpu_var_update(TF_OpKernelContext* ctx, int input, int value, int op, XpuVarCopyFn copy,
                    XpuVarUpdateFn update, TF_Status* status);
bool xpu_var_lock(TF_OpKernelContext* ctx, bool do_lock, const int* inputs, size_t count,
                  XpuVarCopyFn copy, TF_VariableInputLockHolder** holder, TF_Status* status);
/* TF_ReleaseVariableInputLockHolder; NULL is a no-op. */
void xpu_var_unlock(TF_VariableInputLockHolder* holder);
bool xpu_var_tensor(TF_OpKernelContext* ctx, int input, bool lock_held, XpuVarCopyFn copy,
                    TF_Tensor** out, TF_Status* status);
/* Fails compute() of `ctx` with `status` (TF_OpKernelContext_Failure). */
void xpu_context_failure(TF_OpKernelContext* ctx, TF_Status* status);
/* Queues fn on a copy of `work` (size bytes, in the stream's recycled payload) on the stream
 * of `ctx` after checking `ranges`; on failure reports `status` through
 * TF_OpKernelContext_Failure. For the variable callbacks, which run inside compute() without
 * an XpuCompute. */
bool xpu_enqueue_on_context(TF_OpKernelContext* ctx, const char* op, XpuStreamFn fn,
                            const void* work, size_t size, const XpuDeviceRange* ranges,
                            size_t count, TF_Status* status);

/* ---- create() helpers (xpu_kernels_api.c) ----------------------------------------------- */

/* The per-instance state of kernels that need only their op name and dtype. */
typedef struct XpuKernelBase {
  const char* op;
  int code;          /* op-specific selector (which binary op, ...) */
  TF_DataType dtype; /* the T attribute (or the op's main type attribute) */
} XpuKernelBase;

/* Reads type attribute `name` into *dt; false after TF_OpKernelConstruction_Failure. */
bool xpu_attr_type(TF_OpKernelConstruction* k, const char* op, const char* name,
                   TF_DataType* dt);
/* Reads type attribute `name`, or `dflt` when the node does not have it. */
bool xpu_attr_type_or(TF_OpKernelConstruction* k, const char* op, const char* name,
                      TF_DataType dflt, TF_DataType* dt);
/* Reads bool attribute `name`, or `dflt` when the node does not have it. */
bool xpu_attr_bool(TF_OpKernelConstruction* k, const char* op, const char* name, bool dflt,
                   bool* out);
/* Reads int attribute `name`, or `dflt` when the node does not have it. */
bool xpu_attr_int(TF_OpKernelConstruction* k, const char* op, const char* name, int64_t dflt,
                  int64_t* out);
/* Reads string attribute `name` (NUL-terminated into buf), or `dflt` when absent. */
bool xpu_attr_string(TF_OpKernelConstruction* k, const char* op, const char* name,
                     const char* dflt, char* buf, size_t size);
/* Reads int-list attribute `name` (at most max values, *n = length); when absent, *n = -1. */
bool xpu_attr_ints(TF_OpKernelConstruction* k, const char* op, const char* name, int64_t* vals,
                   int max, int* n);
/* Fails construction with INVALID_ARGUMENT; returns NULL. */
void* xpu_construction_fail(TF_OpKernelConstruction* k, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Allocates an XpuKernelBase (or a larger struct of `size` bytes starting with one) with
 * dtype read from `type_attr` (none when NULL); NULL after failing construction. */
void* xpu_kernel_new(TF_OpKernelConstruction* k, size_t size, const char* op, int code,
                     const char* type_attr);
/* delete_func for every kernel: the state is one malloc'ed block. */
void xpu_kernel_delete(void* kernel);

/* ---- registration (xpu_kernels_register.c: TF_InitKernel; xpu_kernels_api.c: builders) -- */

#define XPU_MAX_HOST_MEMORY_ARGS 3

/* One kernel registration: `op` on "XPU" for every dtype in `types` (type attribute
 * `type_attr`; with `type_attr2`, for every pair of types x types2), and the host-memory
 * arguments listed. */
typedef struct XpuKernelDef {
  const char* op;
  void* (*create)(TF_OpKernelConstruction*);
  void (*compute)(void*, TF_OpKernelContext*);
  const char* type_attr;
  const TF_DataType* types;
  const char* type_attr2;
  const TF_DataType* types2;
  const char* host_memory[XPU_MAX_HOST_MEMORY_ARGS];
} XpuKernelDef;

/* Registers a table of kernels with TensorFlow's kernel builders (xpu_kernels_api.c). */
void xpu_register_defs(const XpuKernelDef* defs, size_t count);

/* Whether compute() waits for its work to run (launch blocking): set once by TF_InitKernel,
 * read when compute() enqueues its work. */
extern bool g_launch_blocking;

/* Each kernel file's registration function, called by TF_InitKernel. */
void xpu_register_elementwise_kernels(void);
void xpu_register_shape_kernels(void);
void xpu_register_reduction_kernels(void);
void xpu_register_matmul_kernels(void);
void xpu_register_array_kernels(void);
void xpu_register_nn_kernels(void);
void xpu_register_variable_kernels(void);

/* ---- convolution attributes (xpu_kernels_matmul.c) ------------------------------------- */

enum { XPU_PAD_SAME, XPU_PAD_VALID, XPU_PAD_EXPLICIT };

/* The state of Conv2D and its gradients: the attributes, checked at creation. */
typedef struct XpuConvKernel {
  XpuKernelBase base;
  int padding;
  int64_t stride_h, stride_w, dil_h, dil_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right; /* EXPLICIT */
} XpuConvKernel;

/* create() of a convolution op `op`: T, strides, padding, explicit_paddings, data_format
 * (NHWC only), dilations; NULL after failing construction. */
void* xpu_conv_create(TF_OpKernelConstruction* k, const char* op);
/* The `padding` attribute (SAME, VALID, EXPLICIT) into *mode, checking `explicit_paddings`
 * (np values; -1 when absent): NULL, or why they are refused. */
const char* xpu_parse_padding(const char* padding, const int64_t* pads, int np, int* mode);
/* Output size and leading padding of one spatial dim; false when the output would be empty
 * because the (dilated) filter is larger than the padded input. */
bool xpu_conv_dim(int padding, int64_t in, int64_t k, int64_t stride, int64_t dil,
                  int64_t pad_before, int64_t pad_after, int64_t* out, int64_t* pad);

/* ---- the GEMM engine (xpu_kernels_gemm.c) ----------------------------------------------- */

/* The geometry of Conv2D's im2col view of its input: row r = (n, oh, ow) of the output, column
 * p = (kh, kw, c) of the HWIO filter; the element is the input pixel under that filter tap, or
 * 0 in the padding. */
typedef struct XpuConvGeometry {
  int64_t batch, in_h, in_w, in_c;
  int64_t k_h, k_w;
  int64_t out_h, out_w;
  int64_t stride_h, stride_w, dil_h, dil_w;
  int64_t pad_top, pad_left;
} XpuConvGeometry;

/* C[m x n] = A[m x k] * B[k x n], for `batches` independent products. A is read as
 * a[batch_a[b] + i * a_rs + p * a_cs] (or through `conv`, the im2col view of the input at
 * a + batch_a[b], when not NULL), B as b[batch_b[b] + p * b_rs + j * b_cs] and C is written at
 * c[b * m * ldc + i * ldc + j] (ldc = n). batch_a / batch_b are element offsets (NULL: 0 for
 * every batch). dt is TF_FLOAT or TF_DOUBLE. Splits into tasks for the pool when large. */
typedef struct XpuGemm {
  TF_DataType dtype;
  int64_t m, n, k;
  int64_t batches;
  const void* a;
  int64_t a_rs, a_cs;
  const int64_t* batch_a;
  const XpuConvGeometry* conv;
  const void* b;
  int64_t b_rs, b_cs;
  const int64_t* batch_b;
  void* c;
} XpuGemm;

/* False when the packing buffers could not be allocated (C is then incomplete). */
bool xpu_gemm(const XpuGemm* g);
/* Called where xpu_gemm(g) is enqueued: when it will be split, the kernel threads' helpers
 * wake now, while the stream worker does (xpu_pool_expect_job). */
void xpu_gemm_expect(const XpuGemm* g);
/* The micro-kernel variant in use: "avx512", "avx2" or "generic". */
const char* xpu_gemm_isa(void);
/* Whether the kernels may use AVX2 (the GEMM's choice above is avx2 or avx512). */
bool xpu_kernel_isa_has_avx2(void);

#pragma GCC visibility pop

#endif /* XPU_KERNELS_H_ */
