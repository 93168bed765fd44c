/* xpu_kernels_shape.c: XPU kernels that create, copy or rearrange tensors without arithmetic:
 * Identity, ZerosLike, OnesLike, Fill, Reshape and Transpose.
 *
 * Identity forwards its input (TF_SetOutput; no device work). Reshape copies the buffer on
 * the stream, since the kernel C API cannot make an output share an input's buffer under a
 * new shape. Transpose collapses dims that stay adjacent, then either copies runs that are
 * contiguous in both tensors or, when the innermost output dim is strided in the input, moves
 * 32 x 32 tiles so that both the reads and the writes stay in cache. Fill's `value` is read
 * from device memory when the work runs; the host-memory arguments (Fill's dims, Reshape's
 * shape, Transpose's perm) are read during compute().
 */
#include "xpu_kernels.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Identity --------------------------------------------------------------------------- */

/* create() of Identity. */
static void* create_Identity(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Identity", 0, "T");
}

static const char* const kInputNames[] = {"input", NULL};

/* compute() of Identity: the output is the input tensor itself. */
static void identity_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, "Identity", kInputNames, 0) && xpu_check_dtype(&c, 0, k->dtype)) {
    xpu_forward_input(&c, 0, 0);
  }
  xpu_compute_end(&c);
}

/* ---- fills: ZerosLike, OnesLike, Fill --------------------------------------------------- */

/* The stream work of a fill: `count` elements of `size` bytes, all equal to `value` (or to
 * the element at `src`, read when the work runs). */
typedef struct FillWork {
  unsigned char value[8];
  const void* src;
  char* dst;
  size_t size;
  int64_t count;
} FillWork;

/* One task of a fill: writes elements [begin, end) by doubling copies of the first one. */
static void fill_task(void* ctx, int64_t begin, int64_t end) {
  FillWork* w = ctx;
  char* p = w->dst + begin * (int64_t)w->size;
  size_t total = (size_t)(end - begin) * w->size;
  if (total == 0) return;
  bool bytes_equal = true;
  for (size_t i = 1; i < w->size; i++) bytes_equal = bytes_equal && w->value[i] == w->value[0];
  if (bytes_equal) {
    memset(p, w->value[0], total);
    return;
  }
  memcpy(p, w->value, w->size);
  size_t done = w->size;
  while (done < total) {
    size_t n = done < total - done ? done : total - done;
    memcpy(p + done, p, n);
    done += n;
  }
}

/* Stream work of a fill. */
static TF_Code fill_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  FillWork* w = arg;
  if (w->src != NULL) memcpy(w->value, w->src, w->size);
  xpu_parallel_elements(w->count, fill_task, w);
  return TF_OK;
}

/* The bytes of 1 in type dt. */
static void one_of(TF_DataType dt, unsigned char* out) {
  memset(out, 0, 8);
  switch (dt) {
    case TF_FLOAT: { float v = 1.0f; memcpy(out, &v, sizeof v); break; }
    case TF_DOUBLE: { double v = 1.0; memcpy(out, &v, sizeof v); break; }
    case TF_INT32: { int32_t v = 1; memcpy(out, &v, sizeof v); break; }
    case TF_INT64: { int64_t v = 1; memcpy(out, &v, sizeof v); break; }
    default: out[0] = 1; break; /* bool */
  }
}

/* Allocates output 0 of `shape` and queues a fill with `value` (or *src when not NULL). */
static void queue_fill(XpuCompute* c, TF_DataType dt, const XpuShape* shape,
                       const unsigned char* value, const void* src) {
  if (!xpu_alloc_output(c, 0, dt, shape)) return;
  if (shape->count == 0) {
    xpu_compute_enqueue(c, NULL, NULL, NULL);
    return;
  }
  FillWork w = {.src = src, .dst = xpu_data(c->out[0]), .size = xpu_dtype_size(dt),
                .count = shape->count};
  if (value != NULL) memcpy(w.value, value, 8);
  xpu_compute_enqueue_work(c, fill_work, &w, sizeof w);
}

enum { FILL_ZEROS, FILL_ONES };

/* create() of ZerosLike. */
static void* create_ZerosLike(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "ZerosLike", FILL_ZEROS, "T");
}

/* create() of OnesLike. */
static void* create_OnesLike(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "OnesLike", FILL_ONES, "T");
}

static const char* const kXNames[] = {"x", NULL};

/* compute() of ZerosLike and OnesLike: a tensor shaped like x of zeros / ones. */
static void like_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, k->op, kXNames, 0) && xpu_check_dtype(&c, 0, k->dtype)) {
    unsigned char value[8] = {0};
    if (k->code == FILL_ONES) one_of(k->dtype, value);
    queue_fill(&c, k->dtype, &c.in_shape[0], value, NULL);
  }
  xpu_compute_end(&c);
}

/* create() of Fill. */
static void* create_Fill(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Fill", 0, "T");
}

static const char* const kFillNames[] = {"dims", "value", NULL};

/* compute() of Fill: dims (host memory) gives the shape, the scalar `value` the contents. */
static void fill_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  XpuShape shape = {.count = 1};
  int n = 0;
  if (xpu_compute_begin(&c, ctx, "Fill", kFillNames, 1u << 0) &&
      xpu_check_dtype(&c, 1, k->dtype) &&
      xpu_host_ints(&c, 0, shape.dims, XPU_MAX_RANK, &n)) {
    if (c.in_shape[0].rank != 1) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "dims must be a vector, not rank %d", c.in_shape[0].rank);
    } else if (c.in_shape[1].rank != 0) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "value must be a scalar, not rank %d", c.in_shape[1].rank);
    } else {
      bool ok = true;
      shape.rank = n;
      for (int d = 0; d < n && ok; d++) {
        if (shape.dims[d] < 0) {
          ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "dims[%d] = %" PRId64 " is negative", d,
                        shape.dims[d]);
        }
        shape.count *= shape.dims[d];
      }
      if (ok) queue_fill(&c, k->dtype, &shape, NULL, xpu_data(c.in[1]));
    }
  }
  xpu_compute_end(&c);
}

/* ---- Reshape ---------------------------------------------------------------------------- */

/* The stream work of a plain copy of `bytes` bytes. */
typedef struct CopyWork {
  const char* src;
  char* dst;
  int64_t bytes;
} CopyWork;

#define COPY_GRAIN (XPU_PARALLEL_GRAIN * 8) /* bytes per task */

/* One task of a copy: a slice of the bytes. */
static void copy_task(void* ctx, int64_t t) {
  CopyWork* w = ctx;
  int64_t begin, end;
  xpu_task_range(w->bytes, xpu_task_count(w->bytes, COPY_GRAIN), t, &begin, &end);
  memcpy(w->dst + begin, w->src + begin, (size_t)(end - begin));
}

/* Stream work of a copy. */
static TF_Code copy_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  CopyWork* w = arg;
  xpu_parallel_for(xpu_task_count(w->bytes, COPY_GRAIN), copy_task, w);
  return TF_OK;
}

/* create() of Reshape. */
static void* create_Reshape(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Reshape", 0, "T");
}

static const char* const kReshapeNames[] = {"tensor", "shape", NULL};

/* compute() of Reshape: the new shape may hold one -1, inferred from the element count. */
static void reshape_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  XpuShape shape = {.count = 1};
  int n = 0;
  if (!xpu_compute_begin(&c, ctx, "Reshape", kReshapeNames, 1u << 1) ||
      !xpu_check_dtype(&c, 0, k->dtype) || !xpu_host_ints(&c, 1, shape.dims, XPU_MAX_RANK, &n)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  int unknown = -1;
  int64_t product = 1;
  bool ok = c.in_shape[1].rank == 1 ||
            xpu_fail(&c, TF_INVALID_ARGUMENT, "shape must be a vector, not rank %d",
                     c.in_shape[1].rank);
  shape.rank = n;
  for (int d = 0; d < n && ok; d++) {
    if (shape.dims[d] == -1 && unknown < 0) {
      unknown = d;
    } else if (shape.dims[d] == -1) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "shape may hold only one -1, at %d and %d", unknown,
                    d);
    } else if (shape.dims[d] < 0) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "shape[%d] = %" PRId64 " is negative", d,
                    shape.dims[d]);
    } else {
      product *= shape.dims[d];
    }
  }
  if (ok && unknown >= 0) {
    if (product == 0) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "cannot infer the -1 in shape when the other sizes have a zero product");
    } else if (in->count % product != 0) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "Input to reshape is a tensor with %" PRId64 " values, which is not a "
                    "multiple of %" PRId64 " (the product of the known sizes)",
                    in->count, product);
    } else {
      shape.dims[unknown] = in->count / product;
      product = in->count;
    }
  }
  if (ok && product != in->count) {
    char buf[256];
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                  "Input to reshape is a tensor with %" PRId64 " values, but the requested "
                  "shape %s has %" PRId64, in->count, xpu_shape_str(&shape, buf, sizeof buf),
                  product);
  }
  shape.count = product;
  if (ok && xpu_alloc_output(&c, 0, k->dtype, &shape)) {
    int64_t bytes = in->count * (int64_t)xpu_dtype_size(k->dtype);
    if (bytes == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else {
      CopyWork w = {.src = xpu_data(c.in[0]), .dst = xpu_data(c.out[0]), .bytes = bytes};
      xpu_compute_enqueue_work(&c, copy_work, &w, sizeof w);
    }
  }
  xpu_compute_end(&c);
}

/* ---- Transpose -------------------------------------------------------------------------- */

#define TILE 32

/* The stream work of Transpose, over the collapsed output dims: out_dims[d] with input
 * element stride in_strides[d]. With `tiled`, dim `c` is the one contiguous in the input and
 * the innermost output dim is strided there. */
typedef struct TransposeWork {
  size_t size;
  const char* src;
  char* dst;
  XpuBroadcast walk; /* one operand: the input, strides in elements */
  bool tiled;
  int c;
  int64_t units; /* tiled: (outer index, TILE rows of dim c) pairs */
  int64_t units_per_task;
} TransposeWork;

/* Copies `n` elements of `size` bytes from src (stride `stride` elements) to dst. */
static void strided_copy(char* dst, const char* src, int64_t stride, int64_t n, size_t size) {
  if (stride == 1) {
    memcpy(dst, src, (size_t)n * size);
  } else if (size == 4) {
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * 4, src + i * stride * 4, 4);
  } else if (size == 8) {
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * 8, src + i * stride * 8, 8);
  } else {
    int64_t sz = (int64_t)size;
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * sz, src + i * stride * sz, size);
  }
}

/* Copies one run of the output walk from the strided input. */
static bool transpose_run(void* ctx, const int64_t* offs, const int64_t* inner, int64_t out,
                          int64_t count) {
  TransposeWork* w = ctx;
  strided_copy(w->dst + out * (int64_t)w->size, w->src + offs[0] * (int64_t)w->size, inner[0],
               count, w->size);
  return true;
}

/* Moves one tile: rows [i0, i1) of dim c by columns [j0, j1) of the last output dim. */
static void transpose_tile(const TransposeWork* w, const char* src, char* dst, int64_t i0,
                           int64_t i1, int64_t j0, int64_t j1, int64_t os_c, int64_t is_last) {
  int64_t sz = (int64_t)w->size;
  for (int64_t i = i0; i < i1; i++) {
    char* d = dst + (i * os_c + j0) * sz;
    const char* s = src + (i + j0 * is_last) * sz;
    strided_copy(d, s, is_last, j1 - j0, w->size);
  }
}

/* One unit of the tiled transpose: TILE rows of dim c for one outer index, all columns. */
static void transpose_unit(const TransposeWork* w, int64_t unit) {
  const XpuBroadcast* b = &w->walk;
  int r = b->rank, c = w->c;
  int64_t rows = b->dims[c], cols = b->dims[r - 1];
  int64_t row_blocks = (rows + TILE - 1) / TILE;
  int64_t outer = unit / row_blocks, i0 = (unit % row_blocks) * TILE;
  int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;
  /* Output strides (elements) and the offsets of this outer index. */
  int64_t os[XPU_MAX_RANK], running = 1;
  for (int d = r - 1; d >= 0; d--) {
    os[d] = running;
    running *= b->dims[d];
  }
  int64_t in_off = 0, out_off = 0, rem = outer;
  for (int d = r - 2; d >= 0; d--) {
    if (d == c) continue;
    int64_t idx = rem % b->dims[d];
    rem /= b->dims[d];
    in_off += idx * b->strides[0][d];
    out_off += idx * os[d];
  }
  int64_t sz = (int64_t)w->size;
  for (int64_t j0 = 0; j0 < cols; j0 += TILE) {
    int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;
    transpose_tile(w, w->src + in_off * sz, w->dst + out_off * sz, i0, i1, j0, j1, os[c],
                   b->strides[0][r - 1]);
  }
}

/* One task of Transpose. */
static void transpose_task(void* ctx, int64_t t) {
  TransposeWork* w = ctx;
  if (w->tiled) {
    int64_t begin = t * w->units_per_task;
    int64_t end = begin + w->units_per_task < w->units ? begin + w->units_per_task : w->units;
    for (int64_t u = begin; u < end; u++) transpose_unit(w, u);
    return;
  }
  int64_t begin, end;
  xpu_task_range(w->walk.count, xpu_task_count(w->walk.count, XPU_PARALLEL_GRAIN), t, &begin, &end);
  xpu_broadcast_walk(&w->walk, begin, end, transpose_run, w);
}

/* Stream work of Transpose. */
static TF_Code transpose_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  TransposeWork* w = arg;
  int64_t tasks = w->tiled ? (w->units + w->units_per_task - 1) / w->units_per_task
                           : xpu_task_count(w->walk.count, XPU_PARALLEL_GRAIN);
  xpu_parallel_for(tasks, transpose_task, w);
  return TF_OK;
}

/* create() of Transpose. */
static void* create_Transpose(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Transpose", 0, "T");
}

static const char* const kTransposeNames[] = {"x", "perm", NULL};

/* Fills w->walk with the collapsed output dims of x transposed by perm and picks the
 * algorithm. */
static void transpose_plan(TransposeWork* w, const XpuShape* in, const int64_t* perm) {
  int64_t in_strides[XPU_MAX_RANK], running = 1;
  for (int d = in->rank - 1; d >= 0; d--) {
    in_strides[d] = running;
    running *= in->dims[d];
  }
  XpuBroadcast* b = &w->walk;
  memset(b, 0, sizeof *b);
  b->operands = 1;
  b->count = in->count;
  for (int d = 0; d < in->rank; d++) {
    int64_t p = perm[d];
    if (in->dims[p] == 1) continue;
    if (b->rank > 0 && b->strides[0][b->rank - 1] == in_strides[p] * in->dims[p]) {
      /* The previous output dim comes right before this one in the input too: merge. */
      b->dims[b->rank - 1] *= in->dims[p];
      b->strides[0][b->rank - 1] = in_strides[p];
    } else {
      b->dims[b->rank] = in->dims[p];
      b->strides[0][b->rank] = in_strides[p];
      b->rank++;
    }
  }
  int r = b->rank;
  w->tiled = false;
  if (r >= 2 && b->strides[0][r - 1] != 1 && b->dims[r - 1] >= 4) {
    for (int d = 0; d < r - 1; d++) {
      if (b->strides[0][d] == 1) {
        w->tiled = true;
        w->c = d;
      }
    }
  }
  if (w->tiled) {
    int64_t outer = b->count / (b->dims[w->c] * b->dims[r - 1]);
    w->units = outer * ((b->dims[w->c] + TILE - 1) / TILE);
    int64_t per_unit = TILE * b->dims[r - 1];
    w->units_per_task = (2 * XPU_PARALLEL_GRAIN + per_unit - 1) / per_unit;
  }
}

/* compute() of Transpose: y[i0, ..., in-1] = x[i of perm^-1]; perm (host memory) must be a
 * permutation of 0..rank-1. */
static void transpose_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t perm[XPU_MAX_RANK];
  int n = 0;
  if (!xpu_compute_begin(&c, ctx, "Transpose", kTransposeNames, 1u << 1) ||
      !xpu_check_dtype(&c, 0, k->dtype) || !xpu_host_ints(&c, 1, perm, XPU_MAX_RANK, &n)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  bool ok = c.in_shape[1].rank == 1 ||
            xpu_fail(&c, TF_INVALID_ARGUMENT, "perm must be a vector, not rank %d",
                     c.in_shape[1].rank);
  if (ok && n != in->rank) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "perm has %d elements but x has rank %d", n,
                  in->rank);
  }
  bool seen[XPU_MAX_RANK] = {false};
  XpuShape out = {.rank = in->rank, .count = in->count};
  for (int d = 0; d < n && ok; d++) {
    if (perm[d] < 0 || perm[d] >= in->rank) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "perm[%d] = %" PRId64 " is not in [0, %d)", d,
                    perm[d], in->rank);
    } else if (seen[perm[d]]) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "perm holds %" PRId64 " twice: not a permutation",
                    perm[d]);
    } else {
      seen[perm[d]] = true;
      out.dims[d] = in->dims[perm[d]];
    }
  }
  if (ok && xpu_alloc_output(&c, 0, k->dtype, &out)) {
    if (in->count == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else {
      TransposeWork w; /* copied into the stream's recycled op record when enqueued */
      w.size = xpu_dtype_size(k->dtype);
      w.src = xpu_data(c.in[0]);
      w.dst = xpu_data(c.out[0]);
      transpose_plan(&w, in, perm);
      xpu_compute_enqueue_work(&c, transpose_work, &w, sizeof w);
    }
  }
  xpu_compute_end(&c);
}

/* ---- registration ----------------------------------------------------------------------- */

#define DEF(NAME, COMPUTE, TYPES, HOST) \
  {#NAME, create_##NAME, COMPUTE, "T", TYPES, NULL, NULL, {HOST, NULL}}
static const XpuKernelDef kDefs[] = {
    DEF(Identity, identity_compute, xpu_types_FIXED, NULL),
    DEF(ZerosLike, like_compute, xpu_types_NB, NULL),
    DEF(OnesLike, like_compute, xpu_types_NB, NULL),
    DEF(Fill, fill_compute, xpu_types_NB, "dims"),
    DEF(Reshape, reshape_compute, xpu_types_FIXED, "shape"),
    DEF(Transpose, transpose_compute, xpu_types_FIXED, "perm"),
};

void xpu_register_shape_kernels(void) { xpu_register_defs(kDefs, sizeof kDefs / sizeof kDefs[0]); }
