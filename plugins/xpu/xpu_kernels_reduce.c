/* xpu_kernels_reduce.c: XPU reductions: Sum, Mean, Max, Min, Prod over any set of axes,
 * ArgMax over one axis, and Softmax / LogSoftmax over the last axis.
 *
 * A reduction first collapses the input: dims of size 1 are dropped and neighbouring dims
 * that are both reduced or both kept are merged, so every case becomes one of two shapes of
 * loop. When the innermost collapsed dim is reduced, each output element combines contiguous
 * runs of the input; a run is reduced pairwise in blocks of 128 with 8 accumulators (NumPy's
 * summation order for contiguous data, and vectorizable). When the innermost dim is kept,
 * output rows accumulate input rows element by element. Few outputs over a large domain (a
 * full reduction) are split into chunks whose partial results are then combined in order;
 * the chunking depends on the sizes only, so results do not depend on the thread count.
 *
 * Semantics: integer Sum/Prod wrap; Mean divides the sum by the number of reduced elements
 * (truncating for integers); float Max/Min propagate NaN (NumPy's max/min). Reducing an empty
 * set gives Sum 0, Prod 1, Max -inf (lowest int), Min +inf (highest int), Mean NaN for floats
 * and 0 for integers. Axes may be negative; repeated axes are an error.
 */
#include "xpu_kernels.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD };

/* A scalar of any kernel type. */
typedef union Scalar {
  float f32;
  double f64;
  int32_t i32;
  int64_t i64;
} Scalar;

/* The loops of one (reduction, dtype) pair. */
typedef struct Reducer {
  void (*contig)(const void* x, int64_t n, Scalar* out);     /* out = reduce(x[0, n)) */
  void (*combine)(Scalar* acc, const Scalar* v);             /* acc = acc (+) v */
  void (*rows)(void* row, const void* x, int64_t n);         /* row[j] = row[j] (+) x[j] */
  void (*store)(void* dst, int64_t i, const Scalar* v);      /* dst[i] = v */
  void (*load)(const void* src, int64_t i, Scalar* v);       /* v = src[i] */
  Scalar identity;
} Reducer;

/* Wrapping integer arithmetic. */
#define WADD(U, T, a, b) ((T)((U)(a) + (U)(b)))
#define WMUL(U, T, a, b) ((T)((U)(a) * (U)(b)))

/* Combining expressions of each reduction for floats and integers. */
#define F_SUM(a, b) ((a) + (b))
#define F_PROD(a, b) ((a) * (b))
#define F_MAX(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a)) /* NaN sticks */
#define F_MIN(a, b) (((b) < (a) || (b) != (b)) ? (b) : (a))
#define I_MAX(a, b) ((b) > (a) ? (b) : (a))
#define I_MIN(a, b) ((b) < (a) ? (b) : (a))
#define I32_SUM(a, b) WADD(uint32_t, int32_t, a, b)
#define I32_PROD(a, b) WMUL(uint32_t, int32_t, a, b)
#define I64_SUM(a, b) WADD(uint64_t, int64_t, a, b)
#define I64_PROD(a, b) WMUL(uint64_t, int64_t, a, b)

/* Defines the Reducer loops NAME_* over type T (union member M) with combiner OP and
 * identity ID. */
#define REDUCER(NAME, T, M, OP, ID)                                                   \
  static T NAME##_run(const T* x, int64_t n) {                                        \
    if (n > 128) {                                                                    \
      int64_t h = n / 2;                                                              \
      h -= h % 8;                                                                     \
      T a = NAME##_run(x, h), b = NAME##_run(x + h, n - h);                           \
      return OP(a, b);                                                                \
    }                                                                                 \
    T acc[8];                                                                         \
    for (int k = 0; k < 8; k++) acc[k] = (ID);                                        \
    int64_t i = 0;                                                                    \
    for (; i + 8 <= n; i += 8) {                                                      \
      for (int k = 0; k < 8; k++) acc[k] = OP(acc[k], x[i + k]);                      \
    }                                                                                 \
    T r01 = OP(acc[0], acc[1]), r23 = OP(acc[2], acc[3]);                             \
    T r45 = OP(acc[4], acc[5]), r67 = OP(acc[6], acc[7]);                             \
    T r0123 = OP(r01, r23), r4567 = OP(r45, r67);                                     \
    T r = OP(r0123, r4567);                                                           \
    for (; i < n; i++) r = OP(r, x[i]);                                               \
    return r;                                                                         \
  }                                                                                   \
  static void NAME##_contig(const void* x, int64_t n, Scalar* out) {                  \
    out->M = NAME##_run(x, n);                                                        \
  }                                                                                   \
  static void NAME##_combine(Scalar* acc, const Scalar* v) { acc->M = OP(acc->M, v->M); } \
  static void NAME##_rows(void* rowv, const void* xv, int64_t n) {                    \
    T* restrict row = rowv;                                                           \
    const T* restrict x = xv;                                                         \
    for (int64_t j = 0; j < n; j++) row[j] = OP(row[j], x[j]);                        \
  }

/* Defines the Reducers of one dtype: T, union member M, suffix S, combiners per op. */
#define TYPE_REDUCERS(S, T, M, SUM, PROD, MAX, MIN, LOWEST, HIGHEST)                     \
  REDUCER(sum_##S, T, M, SUM, (T)0)                                                      \
  REDUCER(prod_##S, T, M, PROD, (T)1)                                                    \
  REDUCER(max_##S, T, M, MAX, LOWEST)                                                    \
  REDUCER(min_##S, T, M, MIN, HIGHEST)                                                   \
  static void store_##S(void* dst, int64_t i, const Scalar* v) { ((T*)dst)[i] = v->M; }  \
  static void load_##S(const void* src, int64_t i, Scalar* v) { v->M = ((const T*)src)[i]; }
TYPE_REDUCERS(f32, float, f32, F_SUM, F_PROD, F_MAX, F_MIN, -INFINITY, INFINITY)
TYPE_REDUCERS(f64, double, f64, F_SUM, F_PROD, F_MAX, F_MIN, -INFINITY, INFINITY)
TYPE_REDUCERS(i32, int32_t, i32, I32_SUM, I32_PROD, I_MAX, I_MIN, INT32_MIN, INT32_MAX)
TYPE_REDUCERS(i64, int64_t, i64, I64_SUM, I64_PROD, I_MAX, I_MIN, INT64_MIN, INT64_MAX)

#define R_ENTRY(OP, S, M, ID) \
  {OP##_##S##_contig, OP##_##S##_combine, OP##_##S##_rows, store_##S, load_##S, {.M = ID}}
#define R_ROW(S, M, LOWEST, HIGHEST)                                             \
  {R_ENTRY(sum, S, M, 0), R_ENTRY(max, S, M, LOWEST), R_ENTRY(min, S, M, HIGHEST), \
   R_ENTRY(prod, S, M, 1)}
/* [dtype: f32, f64, i32, i64][sum (and mean), max, min, prod] */
static const Reducer kReducers[4][4] = {
    R_ROW(f32, f32, -INFINITY, INFINITY),
    R_ROW(f64, f64, -INFINITY, INFINITY),
    R_ROW(i32, i32, INT32_MIN, INT32_MAX),
    R_ROW(i64, i64, INT64_MIN, INT64_MAX),
};

/* The kReducers row of a dtype, or -1. */
static int dtype_row(TF_DataType dt) {
  switch (dt) {
    case TF_FLOAT: return 0;
    case TF_DOUBLE: return 1;
    case TF_INT32: return 2;
    case TF_INT64: return 3;
    default: return -1;
  }
}

/* The kReducers column of a reduction op. */
static int op_column(int code) {
  switch (code) {
    case R_MAX: return 1;
    case R_MIN: return 2;
    case R_PROD: return 3;
    default: return 0; /* Sum, Mean */
  }
}

/* ---- the reduction plan and its work ---------------------------------------------------- */

#define PARTIAL_MAX_OUTPUTS 16 /* fewer outputs than this over a large domain: split domains */
#define ROW_BLOCK 512          /* columns per unit when rows accumulate */

/* The stream work of a reduction over the collapsed input. */
typedef struct ReduceWork {
  const Reducer* r;
  int code;
  TF_DataType dtype;
  size_t size;
  const char* x;
  char* out;
  int64_t in_count, out_count;
  int64_t mean_divisor; /* elements reduced into each output */
  /* Collapsed input: dims, strides (elements), reduced flags. */
  int rank;
  int64_t dims[XPU_MAX_RANK], strides[XPU_MAX_RANK];
  bool reduced[XPU_MAX_RANK];
  /* Derived: kept dims (minus the last when it is kept) and reduced dims (minus the last when
   * it is reduced), as lists of collapsed dims. */
  bool inner_reduced;
  int64_t inner; /* length of the last collapsed dim */
  int kept[XPU_MAX_RANK], kept_n;
  int red[XPU_MAX_RANK], red_n;
  int64_t outer_count; /* product of kept[] dims */
  int64_t red_count;   /* product of red[] dims */
  /* Partial mode (inner reduced, few outputs): chunks per output and their results. */
  int64_t chunks;
  Scalar* partials;
  /* Rows mode units (inner kept). */
  int64_t col_blocks, units_per_task;
} ReduceWork;

/* Frees a ReduceWork and its partial results. */
static void reduce_free(void* arg) {
  ReduceWork* w = arg;
  free(w->partials);
  free(w);
}

/* Input offset (elements) of index `idx` over the listed dims (row-major order among them). */
static int64_t list_offset(const ReduceWork* w, const int* list, int n, int64_t idx) {
  int64_t off = 0;
  for (int i = n - 1; i >= 0; i--) {
    int d = list[i];
    off += (idx % w->dims[d]) * w->strides[d];
    idx /= w->dims[d];
  }
  return off;
}

/* Inner reduced: reduces elements [begin, end) of output o's domain (red_count rows of
 * `inner` contiguous elements) into *acc. */
static void reduce_domain(const ReduceWork* w, int64_t o, int64_t begin, int64_t end,
                          Scalar* acc) {
  int64_t base = list_offset(w, w->kept, w->kept_n, o);
  int64_t sz = (int64_t)w->size;
  *acc = w->r->identity;
  while (begin < end) {
    int64_t q = begin / w->inner, l = begin % w->inner;
    int64_t n = w->inner - l < end - begin ? w->inner - l : end - begin;
    Scalar part;
    w->r->contig(w->x + (base + list_offset(w, w->red, w->red_n, q) + l) * sz, n, &part);
    w->r->combine(acc, &part);
    begin += n;
  }
}

/* One task in "outputs" mode: a range of whole outputs (inner reduced). */
static void outputs_task(void* ctx, int64_t t) {
  ReduceWork* w = ctx;
  int64_t domain = w->red_count * w->inner;
  int64_t grain = XPU_PARALLEL_GRAIN / (domain > 0 ? domain : 1) + 1;
  int64_t begin, end;
  xpu_task_range(w->out_count, xpu_task_count(w->out_count, grain), t, &begin, &end);
  for (int64_t o = begin; o < end; o++) {
    Scalar acc;
    reduce_domain(w, o, 0, domain, &acc);
    w->r->store(w->out, o, &acc);
  }
}

/* One task in "partial" mode: chunk t % chunks of output t / chunks. */
static void partial_task(void* ctx, int64_t t) {
  ReduceWork* w = ctx;
  int64_t o = t / w->chunks, chunk = t % w->chunks, begin, end;
  xpu_task_range(w->red_count * w->inner, w->chunks, chunk, &begin, &end);
  reduce_domain(w, o, begin, end, &w->partials[t]);
}

/* One task in "rows" mode (inner kept): units of ROW_BLOCK columns of one output row. */
static void rows_task(void* ctx, int64_t t) {
  ReduceWork* w = ctx;
  int64_t units = w->outer_count * w->col_blocks, sz = (int64_t)w->size;
  int64_t begin = t * w->units_per_task;
  int64_t end = begin + w->units_per_task < units ? begin + w->units_per_task : units;
  for (int64_t u = begin; u < end; u++) {
    int64_t o = u / w->col_blocks, j0 = (u % w->col_blocks) * ROW_BLOCK;
    int64_t n = w->inner - j0 < ROW_BLOCK ? w->inner - j0 : ROW_BLOCK;
    char* row = w->out + (o * w->inner + j0) * sz;
    for (int64_t j = 0; j < n; j++) w->r->store(row, j, &w->r->identity);
    int64_t base = list_offset(w, w->kept, w->kept_n, o) + j0;
    for (int64_t q = 0; q < w->red_count; q++) {
      w->r->rows(row, w->x + (base + list_offset(w, w->red, w->red_n, q)) * sz, n);
    }
  }
}

/* Divides every output by the number of reduced elements (Mean). */
static void mean_divide(ReduceWork* w) {
  int64_t n = w->out_count, d = w->mean_divisor;
  switch (w->dtype) {
    case TF_FLOAT: for (int64_t i = 0; i < n; i++) ((float*)w->out)[i] /= (float)d; break;
    case TF_DOUBLE: for (int64_t i = 0; i < n; i++) ((double*)w->out)[i] /= (double)d; break;
    case TF_INT32:
      for (int64_t i = 0; i < n; i++) ((int32_t*)w->out)[i] = (int32_t)(((int32_t*)w->out)[i] / d);
      break;
    default: for (int64_t i = 0; i < n; i++) ((int64_t*)w->out)[i] /= d; break;
  }
}

/* Stream work of a reduction. */
static TF_Code reduce_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  ReduceWork* w = arg;
  int64_t sz = (int64_t)w->size;
  if (w->in_count == 0) {
    /* Reductions of empty sets: the identity (Mean: NaN for floats, 0 for integers). */
    Scalar v = w->r->identity;
    if (w->code == R_MEAN) {
      if (w->dtype == TF_FLOAT) v.f32 = NAN;
      else if (w->dtype == TF_DOUBLE) v.f64 = NAN;
    }
    for (int64_t i = 0; i < w->out_count; i++) w->r->store(w->out, i, &v);
    return TF_OK;
  }
  if (w->red_count == 1 && !w->inner_reduced) {
    memcpy(w->out, w->x, (size_t)(w->out_count * sz)); /* nothing reduced */
  } else if (!w->inner_reduced) {
    int64_t units = w->outer_count * w->col_blocks;
    xpu_parallel_for((units + w->units_per_task - 1) / w->units_per_task, rows_task, w);
  } else if (w->chunks > 1) {
    xpu_parallel_for(w->out_count * w->chunks, partial_task, w);
    for (int64_t o = 0; o < w->out_count; o++) {
      Scalar acc = w->partials[o * w->chunks];
      for (int64_t c = 1; c < w->chunks; c++) w->r->combine(&acc, &w->partials[o * w->chunks + c]);
      w->r->store(w->out, o, &acc);
    }
  } else {
    int64_t domain = w->red_count * w->inner;
    int64_t grain = XPU_PARALLEL_GRAIN / (domain > 0 ? domain : 1) + 1;
    xpu_parallel_for(xpu_task_count(w->out_count, grain), outputs_task, w);
  }
  if (w->code == R_MEAN && w->mean_divisor > 1) mean_divide(w);
  return TF_OK;
}

/* Collapses the input shape against the reduced axes and sizes the work split. False when
 * out of memory. */
static bool reduce_plan(ReduceWork* w, const XpuShape* in, const bool* axis_reduced) {
  w->rank = 0;
  for (int d = 0; d < in->rank; d++) {
    if (in->dims[d] == 1) continue;
    if (w->rank > 0 && w->reduced[w->rank - 1] == axis_reduced[d]) {
      w->dims[w->rank - 1] *= in->dims[d];
    } else {
      w->dims[w->rank] = in->dims[d];
      w->reduced[w->rank] = axis_reduced[d];
      w->rank++;
    }
  }
  if (w->rank == 0) { /* a single element */
    w->dims[0] = 1;
    w->reduced[0] = false;
    w->rank = 1;
  }
  int64_t running = 1;
  for (int d = w->rank - 1; d >= 0; d--) {
    w->strides[d] = running;
    running *= w->dims[d];
  }
  int last = w->rank - 1;
  w->inner_reduced = w->reduced[last];
  w->inner = w->dims[last];
  w->kept_n = w->red_n = 0;
  w->outer_count = w->red_count = 1;
  for (int d = 0; d < last; d++) {
    if (w->reduced[d]) {
      w->red[w->red_n++] = d;
      w->red_count *= w->dims[d];
    } else {
      w->kept[w->kept_n++] = d;
      w->outer_count *= w->dims[d];
    }
  }
  w->chunks = 1;
  int64_t domain = w->red_count * w->inner;
  if (w->inner_reduced && w->out_count < PARTIAL_MAX_OUTPUTS && domain >= 2 * XPU_PARALLEL_GRAIN) {
    w->chunks = xpu_task_count(domain, XPU_PARALLEL_GRAIN);
    w->partials = malloc((size_t)(w->out_count * w->chunks) * sizeof(Scalar));
    if (w->partials == NULL) return false;
  }
  if (!w->inner_reduced) {
    w->col_blocks = (w->inner + ROW_BLOCK - 1) / ROW_BLOCK;
    int64_t per_unit = w->red_count * (w->inner < ROW_BLOCK ? w->inner : ROW_BLOCK);
    w->units_per_task = XPU_PARALLEL_GRAIN / per_unit + 1;
  }
  return true;
}

/* The state of a reduction kernel. */
typedef struct ReduceKernel {
  XpuKernelBase base;
  bool keep_dims;
} ReduceKernel;

/* Common create() of the reductions: T and keep_dims. */
static void* reduce_create(TF_OpKernelConstruction* k, const char* op, int code) {
  ReduceKernel* r = xpu_kernel_new(k, sizeof *r, op, code, "T");
  if (r != NULL && !xpu_attr_bool(k, op, "keep_dims", false, &r->keep_dims)) {
    free(r);
    return NULL;
  }
  return r;
}

#define REDUCE_CREATE(NAME, CODE)                                   \
  /* create() of NAME. */                                           \
  static void* create_##NAME(TF_OpKernelConstruction* k) {          \
    return reduce_create(k, #NAME, CODE);                           \
  }
REDUCE_CREATE(Sum, R_SUM)
REDUCE_CREATE(Mean, R_MEAN)
REDUCE_CREATE(Max, R_MAX)
REDUCE_CREATE(Min, R_MIN)
REDUCE_CREATE(Prod, R_PROD)

static const char* const kReduceNames[] = {"input", "reduction_indices", NULL};

/* Reads and checks the axes of input 1 against rank `rank` into reduced[]; false after
 * failing. */
static bool read_axes(XpuCompute* c, int rank, bool* reduced) {
  int64_t axes[XPU_MAX_RANK];
  int n = 0;
  if (!xpu_host_ints(c, 1, axes, XPU_MAX_RANK, &n)) return false;
  for (int d = 0; d < rank; d++) reduced[d] = false;
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank) {
      return xpu_fail(c, TF_INVALID_ARGUMENT,
                      "Invalid reduction dimension %" PRId64 " for input with %d dimensions "
                      "(reduction_indices[%d])", a, rank, i);
    }
    if (a < 0) a += rank;
    if (reduced[a]) {
      return xpu_fail(c, TF_INVALID_ARGUMENT, "reduction_indices holds axis %" PRId64
                      " more than once", a);
    }
    reduced[a] = true;
  }
  return true;
}

/* compute() of Sum, Mean, Max, Min and Prod. */
static void reduce_compute(void* kernel, TF_OpKernelContext* ctx) {
  ReduceKernel* k = kernel;
  XpuCompute c;
  bool reduced[XPU_MAX_RANK];
  int row = dtype_row(k->base.dtype);
  if (!xpu_compute_begin(&c, ctx, k->base.op, kReduceNames, 1u << 1) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !read_axes(&c, c.in_shape[0].rank, reduced)) {
    xpu_compute_end(&c);
    return;
  }
  if (row < 0) {
    xpu_fail(&c, TF_INVALID_ARGUMENT, "type %s is not supported", xpu_dtype_name(k->base.dtype));
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  XpuShape out = {.rank = 0, .count = 1};
  for (int d = 0; d < in->rank; d++) {
    if (!reduced[d]) out.dims[out.rank++] = in->dims[d];
    else if (k->keep_dims) out.dims[out.rank++] = 1;
    if (!reduced[d]) out.count *= in->dims[d];
  }
  ReduceWork* w = NULL;
  if (xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
    if (out.count == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else if ((w = calloc(1, sizeof *w)) == NULL) {
      xpu_fail(&c, TF_RESOURCE_EXHAUSTED, "out of host memory");
    } else {
      w->r = &kReducers[row][op_column(k->base.code)];
      w->code = k->base.code;
      w->dtype = k->base.dtype;
      w->size = xpu_dtype_size(k->base.dtype);
      w->x = xpu_data(c.in[0]);
      w->out = xpu_data(c.out[0]);
      w->in_count = in->count;
      w->out_count = out.count;
      w->mean_divisor = in->count / out.count;
      if (in->count > 0 && !reduce_plan(w, in, reduced)) {
        reduce_free(w);
        xpu_fail(&c, TF_RESOURCE_EXHAUSTED, "out of host memory");
      } else {
        xpu_compute_enqueue(&c, reduce_work, w, reduce_free);
      }
    }
  }
  xpu_compute_end(&c);
}

/* ---- ArgMax ----------------------------------------------------------------------------- */

/* The state of an ArgMax kernel. */
typedef struct ArgMaxKernel {
  XpuKernelBase base;
  TF_DataType output_type;
} ArgMaxKernel;

/* create() of ArgMax: T and output_type (int32 or int64, default int64). */
static void* create_ArgMax(TF_OpKernelConstruction* k) {
  ArgMaxKernel* a = xpu_kernel_new(k, sizeof *a, "ArgMax", 0, "T");
  if (a == NULL) return NULL;
  if (!xpu_attr_type_or(k, "ArgMax", "output_type", TF_INT64, &a->output_type)) {
    free(a);
    return NULL;
  }
  if (a->output_type != TF_INT32 && a->output_type != TF_INT64) {
    TF_DataType bad = a->output_type;
    free(a);
    return xpu_construction_fail(k, "ArgMax: output_type must be int32 or int64, not %s",
                                 xpu_dtype_name(bad));
  }
  return a;
}

/* The stream work of ArgMax over x viewed as [outer, axis, inner]. */
typedef struct ArgMaxWork {
  TF_DataType dtype, out_type;
  const void* x;
  void* out;
  int64_t outer, axis, inner;
  int64_t col_blocks, units_per_task;
} ArgMaxWork;

/* Defines the ArgMax loop for type T: columns [j0, j0 + n) of outer index o. The first
 * maximum wins ties; a NaN counts as the maximum (the first NaN wins), as in NumPy. */
#define ARGMAX_LOOP(NAME, T)                                                          \
  static void NAME(const ArgMaxWork* w, int64_t o, int64_t j0, int64_t n, int64_t* idx) { \
    const T* x = (const T*)w->x + o * w->axis * w->inner + j0;                        \
    T best[ROW_BLOCK];                                                                \
    for (int64_t j = 0; j < n; j++) { best[j] = x[j]; idx[j] = 0; }                   \
    for (int64_t a = 1; a < w->axis; a++) {                                           \
      const T* row = x + a * w->inner;                                                \
      for (int64_t j = 0; j < n; j++) {                                               \
        T v = row[j];                                                                 \
        if (v > best[j] || (v != v && best[j] == best[j])) { best[j] = v; idx[j] = a; } \
      }                                                                               \
    }                                                                                 \
  }
ARGMAX_LOOP(argmax_f32, float)
ARGMAX_LOOP(argmax_f64, double)
ARGMAX_LOOP(argmax_i32, int32_t)
ARGMAX_LOOP(argmax_i64, int64_t)

/* One task of ArgMax: units of ROW_BLOCK columns of one outer index. */
static void argmax_task(void* ctx, int64_t t) {
  ArgMaxWork* w = ctx;
  int64_t units = w->outer * w->col_blocks;
  int64_t begin = t * w->units_per_task;
  int64_t end = begin + w->units_per_task < units ? begin + w->units_per_task : units;
  int64_t idx[ROW_BLOCK];
  for (int64_t u = begin; u < end; u++) {
    int64_t o = u / w->col_blocks, j0 = (u % w->col_blocks) * ROW_BLOCK;
    int64_t n = w->inner - j0 < ROW_BLOCK ? w->inner - j0 : ROW_BLOCK;
    switch (w->dtype) {
      case TF_FLOAT: argmax_f32(w, o, j0, n, idx); break;
      case TF_DOUBLE: argmax_f64(w, o, j0, n, idx); break;
      case TF_INT32: argmax_i32(w, o, j0, n, idx); break;
      default: argmax_i64(w, o, j0, n, idx); break;
    }
    int64_t at = o * w->inner + j0;
    for (int64_t j = 0; j < n; j++) {
      if (w->out_type == TF_INT32) ((int32_t*)w->out)[at + j] = (int32_t)idx[j];
      else ((int64_t*)w->out)[at + j] = idx[j];
    }
  }
}

/* Stream work of ArgMax. */
static TF_Code argmax_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  ArgMaxWork* w = arg;
  int64_t units = w->outer * w->col_blocks;
  xpu_parallel_for((units + w->units_per_task - 1) / w->units_per_task, argmax_task, w);
  return TF_OK;
}

static const char* const kArgMaxNames[] = {"input", "dimension", NULL};

/* compute() of ArgMax: the index of the largest value along `dimension` (host memory). */
static void argmax_compute(void* kernel, TF_OpKernelContext* ctx) {
  ArgMaxKernel* k = kernel;
  XpuCompute c;
  int64_t dim = 0;
  int n = 0;
  if (!xpu_compute_begin(&c, ctx, "ArgMax", kArgMaxNames, 1u << 1) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !xpu_host_ints(&c, 1, &dim, 1, &n)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  char buf[256];
  bool ok = true;
  if (c.in_shape[1].rank != 0) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "dimension must be a scalar, not rank %d",
                  c.in_shape[1].rank);
  } else if (dim < -in->rank || dim >= in->rank) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                  "dimension %" PRId64 " must be in [%d, %d) for input of shape %s", dim,
                  -in->rank, in->rank, xpu_shape_str(in, buf, sizeof buf));
  } else if (dtype_row(k->base.dtype) < 0) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "type %s is not supported",
                  xpu_dtype_name(k->base.dtype));
  }
  if (ok && dim < 0) dim += in->rank;
  if (ok && in->dims[dim] == 0) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "Reduction axis %" PRId64 " is empty in shape %s",
                  dim, xpu_shape_str(in, buf, sizeof buf));
  }
  XpuShape out = {.rank = 0, .count = 1};
  int64_t outer = 1, inner = 1;
  for (int d = 0; ok && d < in->rank; d++) {
    if (d == dim) continue;
    out.dims[out.rank++] = in->dims[d];
    out.count *= in->dims[d];
    if (d < dim) outer *= in->dims[d];
    else inner *= in->dims[d];
  }
  if (ok && xpu_alloc_output(&c, 0, k->output_type, &out)) {
    if (out.count == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else {
      ArgMaxWork w = {.dtype = k->base.dtype, .out_type = k->output_type,
                      .x = xpu_data(c.in[0]), .out = xpu_data(c.out[0]), .outer = outer,
                      .axis = in->dims[dim], .inner = inner,
                      .col_blocks = (inner + ROW_BLOCK - 1) / ROW_BLOCK};
      int64_t per_unit = w.axis * (inner < ROW_BLOCK ? inner : ROW_BLOCK);
      w.units_per_task = XPU_PARALLEL_GRAIN / per_unit + 1;
      xpu_compute_enqueue_work(&c, argmax_work, &w, sizeof w);
    }
  }
  xpu_compute_end(&c);
}

/* ---- Softmax and LogSoftmax ------------------------------------------------------------- */

/* The stream work of Softmax / LogSoftmax over rows of length `cols`. */
typedef struct SoftmaxWork {
  TF_DataType dtype;
  bool log;
  const void* x;
  void* out;
  int64_t rows, cols;
} SoftmaxWork;

/* Defines the row loop for type T: subtract the row max, exponentiate, normalise. */
#define SOFTMAX_ROWS(NAME, T, EXP, LOG)                                           \
  static void NAME(const SoftmaxWork* w, int64_t r0, int64_t r1) {                \
    for (int64_t r = r0; r < r1; r++) {                                           \
      const T* x = (const T*)w->x + r * w->cols;                                  \
      T* y = (T*)w->out + r * w->cols;                                            \
      T m = x[0];                                                                 \
      for (int64_t j = 1; j < w->cols; j++) m = x[j] > m ? x[j] : m;              \
      T sum = 0;                                                                  \
      if (w->log) {                                                               \
        for (int64_t j = 0; j < w->cols; j++) sum += EXP(x[j] - m);               \
        T lse = LOG(sum);                                                         \
        for (int64_t j = 0; j < w->cols; j++) y[j] = (x[j] - m) - lse;            \
      } else {                                                                    \
        for (int64_t j = 0; j < w->cols; j++) { y[j] = EXP(x[j] - m); sum += y[j]; } \
        T inv = (T)1 / sum;                                                       \
        for (int64_t j = 0; j < w->cols; j++) y[j] *= inv;                        \
      }                                                                           \
    }                                                                             \
  }
SOFTMAX_ROWS(softmax_f32, float, expf, logf)
SOFTMAX_ROWS(softmax_f64, double, exp, log)

/* One task of Softmax: a range of rows. */
static void softmax_task(void* ctx, int64_t t) {
  SoftmaxWork* w = ctx;
  int64_t grain = XPU_PARALLEL_GRAIN / w->cols + 1, begin, end;
  xpu_task_range(w->rows, xpu_task_count(w->rows, grain), t, &begin, &end);
  if (w->dtype == TF_FLOAT) softmax_f32(w, begin, end);
  else softmax_f64(w, begin, end);
}

/* Stream work of Softmax / LogSoftmax. */
static TF_Code softmax_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  SoftmaxWork* w = arg;
  xpu_parallel_for(xpu_task_count(w->rows, XPU_PARALLEL_GRAIN / w->cols + 1), softmax_task, w);
  return TF_OK;
}

/* create() of Softmax. */
static void* create_Softmax(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Softmax", 0, "T");
}

/* create() of LogSoftmax. */
static void* create_LogSoftmax(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "LogSoftmax", 1, "T");
}

static const char* const kLogitsNames[] = {"logits", NULL};

/* compute() of Softmax (code 0) and LogSoftmax (code 1), over the last axis. */
static void softmax_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, k->op, kLogitsNames, 0) && xpu_check_dtype(&c, 0, k->dtype)) {
    const XpuShape* in = &c.in_shape[0];
    if (in->rank < 1) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "logits must have at least 1 dimension, not rank 0");
    } else if (k->dtype != TF_FLOAT && k->dtype != TF_DOUBLE) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "type %s is not supported", xpu_dtype_name(k->dtype));
    } else if (xpu_alloc_output(&c, 0, k->dtype, in)) {
      if (in->count == 0) {
        xpu_compute_enqueue(&c, NULL, NULL, NULL);
      } else {
        int64_t cols = in->dims[in->rank - 1];
        SoftmaxWork w = {.dtype = k->dtype, .log = k->code == 1, .x = xpu_data(c.in[0]),
                         .out = xpu_data(c.out[0]), .rows = in->count / cols, .cols = cols};
        xpu_compute_enqueue_work(&c, softmax_work, &w, sizeof w);
      }
    }
  }
  xpu_compute_end(&c);
}

/* ---- registration ----------------------------------------------------------------------- */

#define DEF(NAME, COMPUTE, TYPES, HOST) \
  {#NAME, create_##NAME, COMPUTE, "T", TYPES, NULL, NULL, {HOST, NULL}}
static const XpuKernelDef kDefs[] = {
    DEF(Sum, reduce_compute, xpu_types_N, "reduction_indices"),
    DEF(Mean, reduce_compute, xpu_types_N, "reduction_indices"),
    DEF(Max, reduce_compute, xpu_types_N, "reduction_indices"),
    DEF(Min, reduce_compute, xpu_types_N, "reduction_indices"),
    DEF(Prod, reduce_compute, xpu_types_N, "reduction_indices"),
    DEF(ArgMax, argmax_compute, xpu_types_N, "dimension"),
    DEF(Softmax, softmax_compute, xpu_types_F, NULL),
    DEF(LogSoftmax, softmax_compute, xpu_types_F, NULL),
};

void xpu_register_reduction_kernels(void) {
  xpu_register_defs(kDefs, sizeof kDefs / sizeof kDefs[0]);
}
