/* xpu_kernels_matmul.c: XPU kernels built on matrix products: MatMul (float, double through
 * the GEMM engine of xpu_kernels_gemm.c; int32, int64 with a plain wrapping loop),
 * BatchMatMulV2 (float, double; batch dims broadcast like NumPy's matmul) and Conv2D (float,
 * double; NHWC input, HWIO filter, as im2col x filter through the same GEMM).
 *
 * compute() validates the shapes and attributes and works out the operand strides (the
 * transposes are only strides), the per-batch offsets and the convolution geometry; the
 * stream work calls xpu_gemm, which splits large products across the helper-thread pool.
 */
#include "xpu_kernels.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stream work of a float / double product: the GEMM description and what it points to. */
typedef struct GemmJob {
  const char* op;
  XpuGemm g;
  XpuConvGeometry conv;
  int64_t* batch_offsets; /* batch_a then batch_b, or NULL */
} GemmJob;

/* Frees a GemmJob and its offset arrays. */
static void gemm_job_free(void* arg) {
  GemmJob* j = arg;
  free(j->batch_offsets);
  free(j);
}

/* Stream work of MatMul, BatchMatMulV2 and Conv2D in float / double. A job copied into the
 * stream's recycled payload (enqueue_gemm) gets its conv pointer back to its own geometry. */
static TF_Code gemm_job_work(void* arg, char* message, size_t size) {
  GemmJob* j = arg;
  if (j->g.conv != NULL) j->g.conv = &j->conv;
  if (xpu_gemm(&j->g)) return TF_OK;
  snprintf(message, size, "%s: out of host memory for the GEMM packing buffers", j->op);
  return TF_RESOURCE_EXHAUSTED;
}

/* Enqueues a copy of a GEMM job that owns nothing (no batch offsets): no heap block per op. */
static void enqueue_gemm(XpuCompute* c, const GemmJob* j) {
  xpu_gemm_expect(&j->g);
  xpu_compute_enqueue_work(c, gemm_job_work, j, sizeof *j);
}

/* ---- MatMul ----------------------------------------------------------------------------- */

/* The state of MatMul and BatchMatMulV2 kernels: the transpose / adjoint flags. */
typedef struct MatMulKernel {
  XpuKernelBase base;
  bool trans_a, trans_b;
} MatMulKernel;

/* create() of MatMul: T, transpose_a, transpose_b. */
static void* create_MatMul(TF_OpKernelConstruction* k) {
  MatMulKernel* m = xpu_kernel_new(k, sizeof *m, "MatMul", 0, "T");
  if (m != NULL && (!xpu_attr_bool(k, "MatMul", "transpose_a", false, &m->trans_a) ||
                    !xpu_attr_bool(k, "MatMul", "transpose_b", false, &m->trans_b))) {
    free(m);
    return NULL;
  }
  return m;
}

/* The stream work of an integer MatMul: c = a * b with wrapping arithmetic. */
typedef struct IntMatMulWork {
  TF_DataType dtype;
  const void* a;
  const void* b;
  void* c;
  int64_t m, n, k, a_rs, a_cs, b_rs, b_cs;
} IntMatMulWork;

/* Defines the integer product of rows [r0, r1) for type T computed in unsigned type U. */
#define INT_MATMUL_ROWS(NAME, T, U)                                                      \
  static void NAME(const IntMatMulWork* w, int64_t r0, int64_t r1) {                      \
    const T* a = w->a;                                                                   \
    const T* b = w->b;                                                                   \
    T* c = w->c;                                                                         \
    for (int64_t i = r0; i < r1; i++) {                                                  \
      U* row = (U*)(c + i * w->n);                                                       \
      for (int64_t j = 0; j < w->n; j++) row[j] = 0;                                     \
      for (int64_t p = 0; p < w->k; p++) {                                               \
        U s = (U)a[i * w->a_rs + p * w->a_cs];                                           \
        const T* brow = b + p * w->b_rs;                                                 \
        for (int64_t j = 0; j < w->n; j++) row[j] += s * (U)brow[j * w->b_cs];           \
      }                                                                                  \
    }                                                                                    \
  }
INT_MATMUL_ROWS(int_matmul_i32, int32_t, uint32_t)
INT_MATMUL_ROWS(int_matmul_i64, int64_t, uint64_t)

/* One task of an integer MatMul: a range of rows. */
static void int_matmul_task(void* ctx, int64_t t) {
  IntMatMulWork* w = ctx;
  int64_t grain = XPU_PARALLEL_GRAIN / (w->n * w->k + 1) + 1, begin, end;
  xpu_task_range(w->m, xpu_task_count(w->m, grain), t, &begin, &end);
  if (w->dtype == TF_INT32) int_matmul_i32(w, begin, end);
  else int_matmul_i64(w, begin, end);
}

/* Stream work of an integer MatMul. */
static TF_Code int_matmul_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  IntMatMulWork* w = arg;
  int64_t grain = XPU_PARALLEL_GRAIN / (w->n * w->k + 1) + 1;
  xpu_parallel_for(xpu_task_count(w->m, grain), int_matmul_task, w);
  return TF_OK;
}

static const char* const kMatMulNames[] = {"a", "b", NULL};

/* compute() of MatMul: product = op(a) * op(b), op = transpose or not. */
static void matmul_compute(void* kernel, TF_OpKernelContext* ctx) {
  MatMulKernel* k = kernel;
  XpuCompute c;
  if (!xpu_compute_begin(&c, ctx, "MatMul", kMatMulNames, 0) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !xpu_check_dtype(&c, 1, k->base.dtype)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* a = &c.in_shape[0];
  const XpuShape* b = &c.in_shape[1];
  char sa[128], sb[128];
  if (a->rank != 2 || b->rank != 2) {
    xpu_fail(&c, TF_INVALID_ARGUMENT, "In[%d] is not a matrix: a has shape %s, b has shape %s",
             a->rank != 2 ? 0 : 1, xpu_shape_str(a, sa, sizeof sa),
             xpu_shape_str(b, sb, sizeof sb));
    xpu_compute_end(&c);
    return;
  }
  int64_t m = k->trans_a ? a->dims[1] : a->dims[0];
  int64_t ka = k->trans_a ? a->dims[0] : a->dims[1];
  int64_t kb = k->trans_b ? b->dims[1] : b->dims[0];
  int64_t n = k->trans_b ? b->dims[0] : b->dims[1];
  if (ka != kb) {
    xpu_fail(&c, TF_INVALID_ARGUMENT,
             "Matrix size-incompatible: a %s%s and b %s%s: inner dimensions %" PRId64
             " and %" PRId64 " differ", xpu_shape_str(a, sa, sizeof sa),
             k->trans_a ? " (transposed)" : "", xpu_shape_str(b, sb, sizeof sb),
             k->trans_b ? " (transposed)" : "", ka, kb);
    xpu_compute_end(&c);
    return;
  }
  XpuShape out = {.rank = 2, .dims = {m, n}, .count = m * n};
  /* Element strides of A(i, p) and B(p, j). */
  int64_t a_rs = k->trans_a ? 1 : ka, a_cs = k->trans_a ? m : 1;
  int64_t b_rs = k->trans_b ? 1 : n, b_cs = k->trans_b ? kb : 1;
  if (!xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
    xpu_compute_end(&c);
    return;
  }
  if (out.count == 0) {
    xpu_compute_enqueue(&c, NULL, NULL, NULL);
  } else if (k->base.dtype == TF_INT32 || k->base.dtype == TF_INT64) {
    IntMatMulWork w = {k->base.dtype, xpu_data(c.in[0]), xpu_data(c.in[1]),
                       xpu_data(c.out[0]), m, n, ka, a_rs, a_cs, b_rs, b_cs};
    xpu_compute_enqueue_work(&c, int_matmul_work, &w, sizeof w);
  } else {
    GemmJob j = {.op = "MatMul",
                 .g = {.dtype = k->base.dtype, .m = m, .n = n, .k = ka, .batches = 1,
                       .a = xpu_data(c.in[0]), .a_rs = a_rs, .a_cs = a_cs,
                       .b = xpu_data(c.in[1]), .b_rs = b_rs, .b_cs = b_cs,
                       .c = xpu_data(c.out[0])}};
    enqueue_gemm(&c, &j);
  }
  xpu_compute_end(&c);
}

/* ---- BatchMatMulV2 ---------------------------------------------------------------------- */

/* create() of BatchMatMulV2: T, adj_x, adj_y (adjoint = transpose for real types). */
static void* create_BatchMatMulV2(TF_OpKernelConstruction* k) {
  MatMulKernel* m = xpu_kernel_new(k, sizeof *m, "BatchMatMulV2", 0, "T");
  if (m != NULL && (!xpu_attr_bool(k, "BatchMatMulV2", "adj_x", false, &m->trans_a) ||
                    !xpu_attr_bool(k, "BatchMatMulV2", "adj_y", false, &m->trans_b))) {
    free(m);
    return NULL;
  }
  return m;
}

/* Collects the per-batch element offsets of x and y while walking the broadcast batch. */
typedef struct BatchOffsets {
  int64_t* a;
  int64_t* b;
  int64_t a_matrix, b_matrix; /* elements per matrix */
} BatchOffsets;

/* Records the offsets of one run of output batches. */
static bool batch_offsets_run(void* ctx, const int64_t* offs, const int64_t* inner, int64_t out,
                              int64_t count) {
  BatchOffsets* o = ctx;
  for (int64_t i = 0; i < count; i++) {
    o->a[out + i] = (offs[0] + i * inner[0]) * o->a_matrix;
    o->b[out + i] = (offs[1] + i * inner[1]) * o->b_matrix;
  }
  return true;
}

static const char* const kBatchMatMulNames[] = {"x", "y", NULL};

/* compute() of BatchMatMulV2: output[..., :, :] = op(x[..., :, :]) * op(y[..., :, :]). */
static void batch_matmul_compute(void* kernel, TF_OpKernelContext* ctx) {
  MatMulKernel* k = kernel;
  XpuCompute c;
  if (!xpu_compute_begin(&c, ctx, "BatchMatMulV2", kBatchMatMulNames, 0) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !xpu_check_dtype(&c, 1, k->base.dtype)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* x = &c.in_shape[0];
  const XpuShape* y = &c.in_shape[1];
  char sx[256], sy[256];
  if (x->rank < 2 || y->rank < 2) {
    xpu_fail(&c, TF_INVALID_ARGUMENT, "%s must be at least 2-D, not %s", x->rank < 2 ? "x" : "y",
             xpu_shape_str(x->rank < 2 ? x : y, sx, sizeof sx));
    xpu_compute_end(&c);
    return;
  }
  int64_t xr = x->dims[x->rank - 2], xc = x->dims[x->rank - 1];
  int64_t yr = y->dims[y->rank - 2], yc = y->dims[y->rank - 1];
  int64_t m = k->trans_a ? xc : xr, kx = k->trans_a ? xr : xc;
  int64_t ky = k->trans_b ? yc : yr, n = k->trans_b ? yr : yc;
  XpuShape xb = {.rank = x->rank - 2, .count = 1}, yb = {.rank = y->rank - 2, .count = 1};
  memcpy(xb.dims, x->dims, (size_t)xb.rank * sizeof(int64_t));
  memcpy(yb.dims, y->dims, (size_t)yb.rank * sizeof(int64_t));
  for (int d = 0; d < xb.rank; d++) xb.count *= xb.dims[d];
  for (int d = 0; d < yb.rank; d++) yb.count *= yb.dims[d];
  const XpuShape* batch_shapes[2] = {&xb, &yb};
  XpuShape out_batch;
  XpuBroadcast bc;
  if (kx != ky) {
    xpu_fail(&c, TF_INVALID_ARGUMENT,
             "Matrix size-incompatible: x %s%s and y %s%s: inner dimensions %" PRId64
             " and %" PRId64 " differ", xpu_shape_str(x, sx, sizeof sx),
             k->trans_a ? " (adjoint)" : "", xpu_shape_str(y, sy, sizeof sy),
             k->trans_b ? " (adjoint)" : "", kx, ky);
    xpu_compute_end(&c);
    return;
  }
  if (!xpu_broadcast(2, batch_shapes, &out_batch, &bc)) {
    xpu_fail(&c, TF_INVALID_ARGUMENT,
             "batch dimensions of x %s and y %s cannot be broadcast together",
             xpu_shape_str(x, sx, sizeof sx), xpu_shape_str(y, sy, sizeof sy));
    xpu_compute_end(&c);
    return;
  }
  XpuShape out = out_batch;
  out.dims[out.rank++] = m;
  out.dims[out.rank++] = n;
  out.count = out_batch.count * m * n;
  if (!xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
    xpu_compute_end(&c);
    return;
  }
  if (out.count == 0) {
    xpu_compute_enqueue(&c, NULL, NULL, NULL);
    xpu_compute_end(&c);
    return;
  }
  int64_t batches = out_batch.count;
  GemmJob* j = calloc(1, sizeof *j);
  int64_t* offsets = j != NULL ? malloc((size_t)(2 * batches) * sizeof(int64_t)) : NULL;
  if (offsets == NULL) {
    free(j);
    xpu_fail(&c, TF_RESOURCE_EXHAUSTED, "out of host memory");
    xpu_compute_end(&c);
    return;
  }
  BatchOffsets bo = {offsets, offsets + batches, xr * xc, yr * yc};
  xpu_broadcast_walk(&bc, 0, batches, batch_offsets_run, &bo);
  j->op = "BatchMatMulV2";
  j->batch_offsets = offsets;
  j->g = (XpuGemm){.dtype = k->base.dtype, .m = m, .n = n, .k = kx, .batches = batches,
                   .a = xpu_data(c.in[0]), .a_rs = k->trans_a ? 1 : xc,
                   .a_cs = k->trans_a ? xc : 1, .batch_a = bo.a,
                   .b = xpu_data(c.in[1]), .b_rs = k->trans_b ? 1 : yc,
                   .b_cs = k->trans_b ? yc : 1, .batch_b = bo.b, .c = xpu_data(c.out[0])};
  xpu_gemm_expect(&j->g);
  xpu_compute_enqueue(&c, gemm_job_work, j, gemm_job_free); /* the stream owns j now */
  xpu_compute_end(&c);
}

/* ---- Conv2D ----------------------------------------------------------------------------- */

void* xpu_conv_create(TF_OpKernelConstruction* k, const char* op) {
  XpuConvKernel* cv = xpu_kernel_new(k, sizeof *cv, op, 0, "T");
  if (cv == NULL) return NULL;
  char padding[16], format[16];
  int64_t strides[4], dilations[4] = {1, 1, 1, 1}, pads[8] = {0};
  int ns = 0, nd = 0, np = 0;
  if (!xpu_attr_string(k, op, "padding", "", padding, sizeof padding) ||
      !xpu_attr_string(k, op, "data_format", "NHWC", format, sizeof format) ||
      !xpu_attr_ints(k, op, "strides", strides, 4, &ns) ||
      !xpu_attr_ints(k, op, "dilations", dilations, 4, &nd) ||
      !xpu_attr_ints(k, op, "explicit_paddings", pads, 8, &np)) {
    free(cv);
    return NULL;
  }
  const char* why = NULL;
  if (strcmp(format, "NHWC") != 0) {
    why = "data_format: only \"NHWC\" is supported on XPU";
  } else if (ns != 4) {
    why = "strides must be a list of 4 ints";
  } else if (nd != -1 && nd != 4) {
    why = "dilations must be a list of 4 ints";
  } else if (strides[0] != 1 || strides[3] != 1) {
    why = "strides in the batch and depth dimensions must be 1";
  } else if (strides[1] < 1 || strides[2] < 1) {
    why = "strides must be positive";
  } else if (dilations[0] != 1 || dilations[3] != 1) {
    why = "dilations in the batch and depth dimensions must be 1";
  } else if (dilations[1] < 1 || dilations[2] < 1) {
    why = "dilations must be positive";
  } else {
    why = xpu_parse_padding(padding, pads, np, &cv->padding);
  }
  if (why != NULL) {
    free(cv);
    return xpu_construction_fail(k, "%s: %s (padding \"%s\", data_format \"%s\")", op, why,
                                 padding, format);
  }
  cv->stride_h = strides[1];
  cv->stride_w = strides[2];
  cv->dil_h = dilations[1];
  cv->dil_w = dilations[2];
  cv->pad_top = pads[2];
  cv->pad_bottom = pads[3];
  cv->pad_left = pads[4];
  cv->pad_right = pads[5];
  return cv;
}

/* create() of Conv2D: T, strides, padding, explicit_paddings, data_format, dilations
 * (use_cudnn_on_gpu is ignored). */
static void* create_Conv2D(TF_OpKernelConstruction* k) { return xpu_conv_create(k, "Conv2D"); }

const char* xpu_parse_padding(const char* padding, const int64_t* pads, int np, int* mode) {
  if (strcmp(padding, "SAME") == 0) {
    *mode = XPU_PAD_SAME;
  } else if (strcmp(padding, "VALID") == 0) {
    *mode = XPU_PAD_VALID;
  } else if (strcmp(padding, "EXPLICIT") == 0) {
    *mode = XPU_PAD_EXPLICIT;
  } else {
    return "padding must be \"SAME\", \"VALID\" or \"EXPLICIT\"";
  }
  if (*mode != XPU_PAD_EXPLICIT) {
    return np > 0 ? "explicit_paddings may only be given with padding \"EXPLICIT\"" : NULL;
  }
  if (np != 8) return "explicit_paddings must be a list of 8 ints with padding \"EXPLICIT\"";
  if (pads[0] || pads[1] || pads[6] || pads[7]) {
    return "explicit_paddings of the batch and depth dimensions must be 0";
  }
  if (pads[2] < 0 || pads[3] < 0 || pads[4] < 0 || pads[5] < 0) {
    return "explicit_paddings must be non-negative";
  }
  return NULL;
}

bool xpu_conv_dim(int padding, int64_t in, int64_t k, int64_t stride, int64_t dil,
                     int64_t pad_before, int64_t pad_after, int64_t* out, int64_t* pad) {
  int64_t eff = (k - 1) * dil + 1;
  if (padding == XPU_PAD_SAME) {
    *out = (in + stride - 1) / stride;
    int64_t total = (*out - 1) * stride + eff - in;
    *pad = total > 0 ? total / 2 : 0;
    return true;
  }
  if (padding == XPU_PAD_VALID) pad_before = pad_after = 0;
  int64_t span = in + pad_before + pad_after - eff;
  *pad = pad_before;
  if (span < 0) return false;
  *out = span / stride + 1;
  return true;
}

static const char* const kConvNames[] = {"input", "filter", NULL};

/* compute() of Conv2D: output[n, oh, ow, o] = sum over (kh, kw, c) of the input pixel under
 * the tap times filter[kh, kw, c, o]. */
static void conv_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuConvKernel* k = kernel;
  XpuCompute c;
  if (!xpu_compute_begin(&c, ctx, "Conv2D", kConvNames, 0) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !xpu_check_dtype(&c, 1, k->base.dtype)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  const XpuShape* f = &c.in_shape[1];
  char si[128], sf[128];
  XpuConvGeometry g = {0};
  bool ok = true;
  if (in->rank != 4 || f->rank != 4) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "%s must be 4-D, not %s",
                  in->rank != 4 ? "input" : "filter",
                  xpu_shape_str(in->rank != 4 ? in : f, si, sizeof si));
  } else if (f->dims[2] != in->dims[3]) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                  "input depth %" PRId64 " (input %s) must equal the filter's in-depth %" PRId64
                  " (filter %s, HWIO)", in->dims[3], xpu_shape_str(in, si, sizeof si),
                  f->dims[2], xpu_shape_str(f, sf, sizeof sf));
  } else {
    g = (XpuConvGeometry){.batch = in->dims[0], .in_h = in->dims[1], .in_w = in->dims[2],
                          .in_c = in->dims[3], .k_h = f->dims[0], .k_w = f->dims[1],
                          .stride_h = k->stride_h, .stride_w = k->stride_w, .dil_h = k->dil_h,
                          .dil_w = k->dil_w};
    if (!xpu_conv_dim(k->padding, g.in_h, g.k_h, g.stride_h, g.dil_h, k->pad_top, k->pad_bottom,
                  &g.out_h, &g.pad_top) ||
        !xpu_conv_dim(k->padding, g.in_w, g.k_w, g.stride_w, g.dil_w, k->pad_left, k->pad_right,
                  &g.out_w, &g.pad_left)) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "the filter %s (dilations %" PRId64 ", %" PRId64 ") is larger than the "
                    "padded input %s: the output would be empty",
                    xpu_shape_str(f, sf, sizeof sf), k->dil_h, k->dil_w,
                    xpu_shape_str(in, si, sizeof si));
    }
  }
  int64_t o = ok ? f->dims[3] : 0;
  XpuShape out = {.rank = 4, .dims = {g.batch, g.out_h, g.out_w, o},
                  .count = g.batch * g.out_h * g.out_w * o};
  if (ok && xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
    if (out.count == 0) {
      xpu_compute_enqueue(&c, NULL, NULL, NULL);
    } else {
      GemmJob j = {.op = "Conv2D", .conv = g};
      j.g = (XpuGemm){.dtype = k->base.dtype, .m = g.batch * g.out_h * g.out_w, .n = o,
                      .k = g.k_h * g.k_w * g.in_c, .batches = 1, .a = xpu_data(c.in[0]),
                      .conv = &j.conv, .b = xpu_data(c.in[1]), .b_rs = o, .b_cs = 1,
                      .c = xpu_data(c.out[0])};
      enqueue_gemm(&c, &j);
    }
  }
  xpu_compute_end(&c);
}

/* ---- registration ----------------------------------------------------------------------- */

#define DEF(NAME, COMPUTE, TYPES) \
  {#NAME, create_##NAME, COMPUTE, "T", TYPES, NULL, NULL, {NULL, NULL}}
static const XpuKernelDef kDefs[] = {
    DEF(MatMul, matmul_compute, xpu_types_MATMUL),
    DEF(BatchMatMulV2, batch_matmul_compute, xpu_types_F),
    DEF(Conv2D, conv_compute, xpu_types_F),
};

void xpu_register_matmul_kernels(void) { xpu_register_defs(kDefs, sizeof kDefs / sizeof kDefs[0]); }
