/* xpu_kernels_array.c: XPU kernels that rearrange elements without arithmetic: ConcatV2,
 * Pack, Split, SplitV, Slice, StridedSlice, Tile, BroadcastTo, Pad, ExpandDims, Squeeze, GatherV2,
 * Shape and Range.
 *
 * All but GatherV2 and Range are one engine: a "view copy" that walks an index space in row
 * order and copies element src[sum(i_d * src_stride_d)] to dst[sum(i_d * dst_stride_d)].
 * Concat places each input at its offset in the output, Split takes each output from its
 * offset in the input, slices read with begin offsets and (possibly negative) steps,
 * broadcasting reads with stride 0, Tile reads a rank-2r view ([m0, d0, m1, d1, ...] with
 * strides [0, s0, 0, s1, ...]) and Pad writes the input into the middle of a filled output.
 * Dims of size 1 are dropped and neighbours merged where both sides stay contiguous, so runs
 * that are contiguous on both sides become one memcpy.
 *
 * Every argument that shapes the output (axes, begin/end/strides, multiples, paddings, sizes)
 * is a host-memory input, read and checked during compute(), as TensorFlow's GPU kernels
 * declare them. GatherV2's indices live on the device and are read when the work runs: an
 * index out of range gives zeros for its slice (TensorFlow's GPU behaviour) instead of failing
 * the stream.
 */
#include "xpu_kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the view-copy engine --------------------------------------------------------------- */

/* One strided copy: dims, element strides on both sides, base pointers (already offset). */
typedef struct ViewCopy {
  size_t size; /* bytes per element */
  int rank;
  int64_t count;
  int64_t dims[XPU_MAX_RANK];
  int64_t src_strides[XPU_MAX_RANK];
  int64_t dst_strides[XPU_MAX_RANK];
  const char* src;
  char* dst;
} ViewCopy;

/* Row-major element strides of a shape. */
static void contiguous_strides(int rank, const int64_t* dims, int64_t* strides) {
  int64_t running = 1;
  for (int d = rank - 1; d >= 0; d--) {
    strides[d] = running;
    running *= dims[d];
  }
}

/* Sets up *v, dropping dims of size 1 and merging neighbours contiguous on both sides. */
static void view_init(ViewCopy* v, size_t size, int rank, const int64_t* dims,
                      const int64_t* src_strides, const int64_t* dst_strides, const char* src,
                      char* dst) {
  v->size = size;
  v->src = src;
  v->dst = dst;
  v->rank = 0;
  v->count = 1;
  for (int d = 0; d < rank; d++) {
    v->count *= dims[d];
    if (dims[d] == 1) continue;
    int r = v->rank;
    if (r > 0 && v->src_strides[r - 1] == src_strides[d] * dims[d] &&
        v->dst_strides[r - 1] == dst_strides[d] * dims[d]) {
      v->dims[r - 1] *= dims[d];
      v->src_strides[r - 1] = src_strides[d];
      v->dst_strides[r - 1] = dst_strides[d];
      continue;
    }
    v->dims[r] = dims[d];
    v->src_strides[r] = src_strides[d];
    v->dst_strides[r] = dst_strides[d];
    v->rank++;
  }
}

/* Copies n elements of `size` bytes with element strides ss and ds. */
static void copy_run(char* restrict dst, int64_t ds, const char* restrict src, int64_t ss,
                     int64_t n, size_t size) {
  if (ss == 1 && ds == 1) {
    memcpy(dst, src, (size_t)n * size);
    return;
  }
  int64_t sb = ss * (int64_t)size, db = ds * (int64_t)size;
  switch (size) {
    case 1: for (int64_t i = 0; i < n; i++) dst[i * db] = src[i * sb]; break;
    case 2: for (int64_t i = 0; i < n; i++) memcpy(dst + i * db, src + i * sb, 2); break;
    case 4: for (int64_t i = 0; i < n; i++) memcpy(dst + i * db, src + i * sb, 4); break;
    case 8: for (int64_t i = 0; i < n; i++) memcpy(dst + i * db, src + i * sb, 8); break;
    default: for (int64_t i = 0; i < n; i++) memcpy(dst + i * db, src + i * sb, size); break;
  }
}

/* Copies elements [begin, end) of the view's row-major index space. */
static void view_copy_range(const ViewCopy* v, int64_t begin, int64_t end) {
  if (begin >= end) return;
  int r = v->rank;
  int64_t sz = (int64_t)v->size;
  if (r == 0) {
    memcpy(v->dst, v->src, v->size);
    return;
  }
  int64_t idx[XPU_MAX_RANK];
  int64_t rem = begin, so = 0, doff = 0;
  for (int d = r - 1; d >= 0; d--) {
    idx[d] = rem % v->dims[d];
    rem /= v->dims[d];
    so += idx[d] * v->src_strides[d];
    doff += idx[d] * v->dst_strides[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = v->dims[r - 1] - idx[r - 1];
    if (n > end - pos) n = end - pos;
    copy_run(v->dst + doff * sz, v->dst_strides[r - 1], v->src + so * sz, v->src_strides[r - 1],
             n, v->size);
    pos += n;
    idx[r - 1] += n;
    so += n * v->src_strides[r - 1];
    doff += n * v->dst_strides[r - 1];
    for (int d = r - 1; d > 0 && idx[d] == v->dims[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      so += v->src_strides[d - 1] - v->dims[d] * v->src_strides[d];
      doff += v->dst_strides[d - 1] - v->dims[d] * v->dst_strides[d];
    }
  }
}

/* The stream work of the view-copy kernels: an optional fill, then `count` views. */
typedef struct CopyPlan {
  char* fill_dst; /* Pad: the whole output, filled with fill_value first */
  int64_t fill_count;
  unsigned char fill_value[16];
  const void* fill_src; /* PadV2-style value read on the device (NULL: fill_value) */
  int count;
  int current; /* the view the tasks are copying */
  ViewCopy views[];
} CopyPlan;

/* One task of the current view: a slice of its elements. */
static void plan_task(void* ctx, int64_t t) {
  CopyPlan* p = ctx;
  const ViewCopy* v = &p->views[p->current];
  int64_t begin, end;
  xpu_task_range(v->count, xpu_task_count(v->count, XPU_PARALLEL_GRAIN), t, &begin, &end);
  view_copy_range(v, begin, end);
}

/* Stream work of a copy plan. */
static TF_Code plan_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  CopyPlan* p = arg;
  if (p->fill_dst != NULL && p->fill_count > 0) {
    size_t esize = p->views[0].size;
    if (p->fill_src != NULL) memcpy(p->fill_value, p->fill_src, esize);
    bool zero = true;
    for (size_t i = 0; i < esize; i++) zero = zero && p->fill_value[i] == 0;
    if (zero) {
      memset(p->fill_dst, 0, (size_t)p->fill_count * esize);
    } else {
      for (int64_t i = 0; i < p->fill_count; i++) {
        memcpy(p->fill_dst + i * (int64_t)esize, p->fill_value, esize);
      }
    }
  }
  for (p->current = 0; p->current < p->count; p->current++) {
    const ViewCopy* v = &p->views[p->current];
    if (v->count > 0) xpu_parallel_for(xpu_task_count(v->count, XPU_PARALLEL_GRAIN), plan_task, p);
  }
  return TF_OK;
}

/* A plan with room for `views` views; NULL after failing compute(). */
static CopyPlan* plan_new(XpuCompute* c, int views) {
  CopyPlan* p = calloc(1, sizeof *p + (size_t)views * sizeof(ViewCopy));
  if (p == NULL) xpu_fail(c, TF_RESOURCE_EXHAUSTED, "out of host memory");
  return p;
}

/* Queues `p` (or nothing when the outputs are empty: `empty`). Takes ownership of p. */
static void plan_enqueue(XpuCompute* c, CopyPlan* p, bool empty) {
  if (empty) {
    free(p);
    xpu_compute_enqueue(c, NULL, NULL, NULL);
  } else {
    xpu_compute_enqueue(c, plan_work, p, NULL);
  }
}

/* Allocates output `i` of `shape` and queues a single view: src viewed with `src_strides`
 * (element strides over `shape`'s dims) from element offset `src_offset` of input 0. */
static void copy_view_of_input(XpuCompute* c, TF_DataType dt, const XpuShape* shape,
                               const int64_t* src_strides, int64_t src_offset) {
  if (!xpu_alloc_output(c, 0, dt, shape)) return;
  CopyPlan* p = plan_new(c, 1);
  if (p == NULL) return;
  size_t size = xpu_dtype_size(dt);
  int64_t dst_strides[XPU_MAX_RANK];
  contiguous_strides(shape->rank, shape->dims, dst_strides);
  const char* src = shape->count > 0 ? (const char*)xpu_data(c->in[0]) + src_offset * (int64_t)size
                                     : NULL;
  view_init(&p->views[0], size, shape->rank, shape->dims, src_strides, dst_strides, src,
            xpu_data(c->out[0]));
  p->count = 1;
  plan_enqueue(c, p, shape->count == 0);
}

/* Allocates output 0 with input 0's elements under a new shape (a plain copy). */
static void copy_reshaped(XpuCompute* c, TF_DataType dt, const XpuShape* shape) {
  XpuShape flat = {.rank = 1, .dims = {shape->count}, .count = shape->count};
  if (!xpu_alloc_output(c, 0, dt, shape)) return;
  CopyPlan* p = plan_new(c, 1);
  if (p == NULL) return;
  int64_t one = 1;
  view_init(&p->views[0], xpu_dtype_size(dt), 1, flat.dims, &one, &one,
            shape->count > 0 ? xpu_data(c->in[0]) : NULL, xpu_data(c->out[0]));
  p->count = 1;
  plan_enqueue(c, p, shape->count == 0);
}

/* Normalises `axis` into [0, rank) (or [0, rank] with `inclusive`); false after failing. */
static bool normalise_axis(XpuCompute* c, const char* what, int64_t axis, int rank,
                           bool inclusive, int* out) {
  int64_t limit = rank + (inclusive ? 1 : 0);
  if (axis < -limit || axis >= limit) {
    return xpu_fail(c, TF_INVALID_ARGUMENT,
                    "%s %" PRId64 " is out of range for rank %d (valid: %" PRId64 "..%" PRId64
                    ")", what, axis, rank, -limit, limit - 1);
  }
  *out = (int)(axis < 0 ? axis + limit : axis);
  return true;
}

/* Reads a scalar host-memory integer input (or a 1-element vector). */
static bool host_scalar(XpuCompute* c, int i, const char* what, int64_t* out) {
  int64_t v[1];
  int n = 0;
  if (!xpu_host_ints(c, i, v, 1, &n)) return false;
  if (n != 1) return xpu_fail(c, TF_INVALID_ARGUMENT, "%s must be a scalar", what);
  *out = v[0];
  return true;
}

/* Reads a host-memory integer input of any rank (flattened) into vals (at most max). */
static bool host_ints_any(XpuCompute* c, int i, const char* what, int64_t* vals, int max,
                          int* n) {
  const TF_Tensor* t = c->in[i];
  TF_DataType dt = TF_TensorType(t);
  if (dt != TF_INT32 && dt != TF_INT64) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "%s must be int32 or int64, not %s", what,
                    xpu_dtype_name(dt));
  }
  if (c->in_shape[i].count > max) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "%s has %" PRId64 " elements; at most %d allowed",
                    what, c->in_shape[i].count, max);
  }
  const void* data = TF_TensorData(t);
  for (int64_t k = 0; k < c->in_shape[i].count; k++) {
    vals[k] = dt == TF_INT32 ? ((const int32_t*)data)[k] : ((const int64_t*)data)[k];
  }
  *n = (int)c->in_shape[i].count;
  return true;
}

static void* create_T(TF_OpKernelConstruction* k, const char* op) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), op, 0, "T");
}

/* ---- ConcatV2, Pack --------------------------------------------------------------------- */

static void* create_ConcatV2(TF_OpKernelConstruction* k) { return create_T(k, "ConcatV2"); }

static const char* const kAxisNames[] = {"axis", NULL};

/* compute() of ConcatV2: values (N tensors) joined along the host-memory `axis`. */
static void concat_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t axis_value = 0;
  if (!xpu_compute_begin_list(&c, ctx, "ConcatV2", "values", 1, kAxisNames, 1u) ||
      !host_scalar(&c, c.list_count, "axis", &axis_value)) {
    xpu_compute_end(&c);
    return;
  }
  int n = c.list_count;
  const XpuShape* first = &c.in_shape[0];
  int axis = 0;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) ok = xpu_check_dtype(&c, i, k->dtype);
  if (ok && first->rank == 0) ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "cannot concatenate scalars (use Pack)");
  ok = ok && normalise_axis(&c, "axis", axis_value, first->rank, false, &axis);
  XpuShape out = *first;
  out.dims[axis] = 0;
  for (int i = 0; i < n && ok; i++) {
    const XpuShape* s = &c.in_shape[i];
    bool same = s->rank == first->rank;
    for (int d = 0; same && d < s->rank; d++) same = d == axis || s->dims[d] == first->dims[d];
    if (!same) {
      char a[256], b[256];
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "values[%d] has shape %s, which does not match values[0] %s outside axis %d",
                    i, xpu_shape_str(s, a, sizeof a), xpu_shape_str(first, b, sizeof b), axis);
    }
    if (ok) out.dims[axis] += s->dims[axis];
  }
  if (ok) {
    out.count = 1;
    for (int d = 0; d < out.rank; d++) out.count *= out.dims[d];
  }
  if (ok && xpu_alloc_output(&c, 0, k->dtype, &out)) {
    CopyPlan* p = plan_new(&c, n);
    if (p != NULL) {
      size_t size = xpu_dtype_size(k->dtype);
      int64_t dst_strides[XPU_MAX_RANK], src_strides[XPU_MAX_RANK];
      contiguous_strides(out.rank, out.dims, dst_strides);
      int64_t offset = 0;
      for (int i = 0; i < n; i++) {
        const XpuShape* s = &c.in_shape[i];
        if (s->count == 0) continue;
        contiguous_strides(s->rank, s->dims, src_strides);
        view_init(&p->views[p->count++], size, s->rank, s->dims, src_strides, dst_strides,
                  xpu_data(c.in[i]),
                  (char*)xpu_data(c.out[0]) + offset * dst_strides[axis] * (int64_t)size);
        offset += s->dims[axis];
      }
      plan_enqueue(&c, p, out.count == 0);
    }
  }
  xpu_compute_end(&c);
}

/* The state of a Pack kernel. */
typedef struct PackKernel {
  XpuKernelBase base;
  int64_t axis;
} PackKernel;

static void* create_Pack(TF_OpKernelConstruction* k) {
  PackKernel* p = xpu_kernel_new(k, sizeof *p, "Pack", 0, "T");
  if (p != NULL && !xpu_attr_int(k, "Pack", "axis", 0, &p->axis)) {
    free(p);
    return NULL;
  }
  return p;
}

/* compute() of Pack: N tensors of one shape stacked along a new dim `axis`. */
static void pack_compute(void* kernel, TF_OpKernelContext* ctx) {
  PackKernel* k = kernel;
  XpuCompute c;
  if (!xpu_compute_begin_list(&c, ctx, "Pack", "values", 1, NULL, 0)) {
    xpu_compute_end(&c);
    return;
  }
  int n = c.list_count;
  const XpuShape* first = &c.in_shape[0];
  bool ok = true;
  int axis = 0;
  for (int i = 0; i < n && ok; i++) ok = xpu_check_dtype(&c, i, k->base.dtype);
  for (int i = 1; i < n && ok; i++) {
    const XpuShape* s = &c.in_shape[i];
    bool same = s->rank == first->rank;
    for (int d = 0; same && d < s->rank; d++) same = s->dims[d] == first->dims[d];
    if (!same) {
      char a[256], b[256];
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "values[%d] has shape %s but values[0] has %s", i,
                    xpu_shape_str(s, a, sizeof a), xpu_shape_str(first, b, sizeof b));
    }
  }
  if (ok && first->rank + 1 > XPU_MAX_RANK) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "the result would have rank %d; at most %d",
                  first->rank + 1, XPU_MAX_RANK);
  }
  ok = ok && normalise_axis(&c, "axis", k->axis, first->rank, true, &axis);
  XpuShape out = {.rank = first->rank + 1, .count = first->count * n};
  for (int d = 0, s = 0; ok && d < out.rank; d++) out.dims[d] = d == axis ? n : first->dims[s++];
  if (ok && xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
    CopyPlan* p = plan_new(&c, n);
    if (p != NULL) {
      size_t size = xpu_dtype_size(k->base.dtype);
      int64_t out_strides[XPU_MAX_RANK], dst_strides[XPU_MAX_RANK], src_strides[XPU_MAX_RANK];
      contiguous_strides(out.rank, out.dims, out_strides);
      for (int d = 0, s = 0; d < out.rank; d++) {
        if (d != axis) dst_strides[s++] = out_strides[d];
      }
      contiguous_strides(first->rank, first->dims, src_strides);
      for (int i = 0; i < n && first->count > 0; i++) {
        view_init(&p->views[p->count++], size, first->rank, first->dims, src_strides,
                  dst_strides, xpu_data(c.in[i]),
                  (char*)xpu_data(c.out[0]) + i * out_strides[axis] * (int64_t)size);
      }
      plan_enqueue(&c, p, out.count == 0);
    }
  }
  xpu_compute_end(&c);
}

/* ---- Split ------------------------------------------------------------------------------ */

/* The state of a Split kernel. */
typedef struct SplitKernel {
  XpuKernelBase base;
  int64_t num_split;
} SplitKernel;

/* create() of Split and SplitV (`op`): T and num_split. */
static void* split_create(TF_OpKernelConstruction* k, const char* op) {
  SplitKernel* s = xpu_kernel_new(k, sizeof *s, op, 0, "T");
  if (s != NULL && !xpu_attr_int(k, op, "num_split", 0, &s->num_split)) {
    free(s);
    return NULL;
  }
  if (s != NULL && (s->num_split < 1 || s->num_split > XPU_MAX_KERNEL_ARGS)) {
    int64_t n = s->num_split;
    free(s);
    return xpu_construction_fail(k, "%s: num_split must be in 1..%d, not %" PRId64, op,
                                 XPU_MAX_KERNEL_ARGS, n);
  }
  return s;
}

static void* create_Split(TF_OpKernelConstruction* k) { return split_create(k, "Split"); }
static void* create_SplitV(TF_OpKernelConstruction* k) { return split_create(k, "SplitV"); }

/* Allocates the n outputs of a split of input `in_index` (shape `in`) along `axis` into parts
 * of sizes[i] elements (summing to in->dims[axis]) and enqueues the copies. */
static void split_parts(XpuCompute* c, TF_DataType dtype, int in_index, int axis,
                        const int64_t* sizes, int n) {
  const XpuShape* in = &c->in_shape[in_index];
  if (!xpu_reserve_outputs(c, n)) return;
  bool ok = true;
  int64_t total = 0;
  for (int i = 0; i < n && ok; i++) {
    XpuShape part = *in;
    part.dims[axis] = sizes[i];
    part.count = 1;
    for (int d = 0; d < part.rank; d++) part.count *= part.dims[d];
    total += part.count;
    ok = xpu_alloc_output(c, i, dtype, &part);
  }
  CopyPlan* p = ok ? plan_new(c, n) : NULL;
  if (p == NULL) return;
  size_t size = xpu_dtype_size(dtype);
  int64_t src_strides[XPU_MAX_RANK], dst_strides[XPU_MAX_RANK];
  contiguous_strides(in->rank, in->dims, src_strides);
  int64_t offset = 0;
  for (int i = 0; i < n; i++) {
    XpuShape part = *in;
    part.dims[axis] = sizes[i];
    part.count = 1;
    for (int d = 0; d < part.rank; d++) part.count *= part.dims[d];
    if (part.count > 0) {
      contiguous_strides(part.rank, part.dims, dst_strides);
      view_init(&p->views[p->count++], size, part.rank, part.dims, src_strides, dst_strides,
                (const char*)xpu_data(c->in[in_index]) +
                    offset * src_strides[axis] * (int64_t)size,
                xpu_data(c->out[i]));
    }
    offset += sizes[i];
  }
  plan_enqueue(c, p, total == 0);
}

static const char* const kSplitNames[] = {"split_dim", "value", NULL};

/* compute() of Split: `value` cut into num_split equal parts along host-memory split_dim. */
static void split_compute(void* kernel, TF_OpKernelContext* ctx) {
  SplitKernel* k = kernel;
  XpuCompute c;
  int64_t dim_value = 0;
  int axis = 0;
  int n = (int)k->num_split;
  if (xpu_compute_begin(&c, ctx, "Split", kSplitNames, 1u << 0) &&
      xpu_check_dtype(&c, 1, k->base.dtype) && host_scalar(&c, 0, "split_dim", &dim_value) &&
      normalise_axis(&c, "split_dim", dim_value, c.in_shape[1].rank, false, &axis)) {
    const XpuShape* in = &c.in_shape[1];
    if (in->dims[axis] % n != 0) {
      char a[256];
      xpu_fail(&c, TF_INVALID_ARGUMENT,
               "Number of ways to split should evenly divide the split dimension, but got "
               "split_dim %d (size = %" PRId64 ") and num_split %d (value shape %s)",
               axis, in->dims[axis], n, xpu_shape_str(in, a, sizeof a));
    } else {
      int64_t* sizes = calloc((size_t)n, sizeof *sizes);
      if (sizes == NULL) {
        xpu_fail(&c, TF_RESOURCE_EXHAUSTED, "out of host memory");
      } else {
        for (int i = 0; i < n; i++) sizes[i] = in->dims[axis] / n;
        split_parts(&c, k->base.dtype, 1, axis, sizes, n);
        free(sizes);
      }
    }
  }
  xpu_compute_end(&c);
}

static const char* const kSplitVNames[] = {"value", "size_splits", "split_dim", NULL};

/* compute() of SplitV: `value` cut along host-memory split_dim into parts of the host-memory
 * size_splits; one entry may be -1, the rest of the dimension. */
static void splitv_compute(void* kernel, TF_OpKernelContext* ctx) {
  SplitKernel* k = kernel;
  XpuCompute c;
  int64_t dim_value = 0;
  int axis = 0, count = 0;
  int n = (int)k->num_split;
  int64_t* sizes = calloc((size_t)n, sizeof *sizes);
  if (xpu_compute_begin(&c, ctx, "SplitV", kSplitVNames, 0x6u) &&
      xpu_check_dtype(&c, 0, k->base.dtype) && host_scalar(&c, 2, "split_dim", &dim_value) &&
      normalise_axis(&c, "split_dim", dim_value, c.in_shape[0].rank, false, &axis)) {
    const XpuShape* in = &c.in_shape[0];
    if (sizes == NULL) {
      xpu_fail(&c, TF_RESOURCE_EXHAUSTED, "out of host memory");
    } else if (c.in_shape[1].count != n) {
      xpu_fail(&c, TF_INVALID_ARGUMENT,
               "size_splits must have num_split (%d) entries, got %" PRId64, n,
               c.in_shape[1].count);
    } else if (xpu_host_ints(&c, 1, sizes, n, &count)) {
      int unknown = -1;
      int64_t known = 0;
      bool ok = true;
      for (int i = 0; i < n && ok; i++) {
        if (sizes[i] == -1 && unknown < 0) {
          unknown = i;
        } else if (sizes[i] < 0) {
          ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                        "size_splits may hold one -1 and otherwise sizes >= 0; entry %d is %"
                        PRId64, i, sizes[i]);
        } else {
          known += sizes[i];
        }
      }
      if (ok && unknown >= 0) sizes[unknown] = in->dims[axis] - known;
      if (ok && (unknown >= 0 ? sizes[unknown] < 0 : known != in->dims[axis])) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                      "size_splits (sum %" PRId64 ") must add up to the size of split_dim %d (%"
                      PRId64 ")", known, axis, in->dims[axis]);
      }
      if (ok) split_parts(&c, k->base.dtype, 0, axis, sizes, n);
    }
  }
  xpu_compute_end(&c);
  free(sizes);
}

/* ---- Slice, StridedSlice ---------------------------------------------------------------- */

static void* create_Slice(TF_OpKernelConstruction* k) { return create_T(k, "Slice"); }

static const char* const kSliceNames[] = {"input", "begin", "size", NULL};

/* compute() of Slice: begin and size (host memory) per dim; size -1 takes the rest. */
static void slice_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t begin[XPU_MAX_RANK], size[XPU_MAX_RANK];
  int nb = 0, ns = 0;
  if (xpu_compute_begin(&c, ctx, "Slice", kSliceNames, 0x6u) && xpu_check_dtype(&c, 0, k->dtype) &&
      xpu_host_ints(&c, 1, begin, XPU_MAX_RANK, &nb) &&
      xpu_host_ints(&c, 2, size, XPU_MAX_RANK, &ns)) {
    const XpuShape* in = &c.in_shape[0];
    bool ok = true;
    if (nb != in->rank || ns != in->rank) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "begin and size must have one entry per input dim (%d), got %d and %d",
                    in->rank, nb, ns);
    }
    XpuShape out = {.rank = in->rank, .count = 1};
    int64_t strides[XPU_MAX_RANK], offset = 0;
    contiguous_strides(in->rank, in->dims, strides);
    for (int d = 0; ok && d < in->rank; d++) {
      int64_t s = size[d] == -1 ? in->dims[d] - begin[d] : size[d];
      if (begin[d] < 0 || begin[d] > in->dims[d] || s < 0 || begin[d] + s > in->dims[d]) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                      "Expected begin[%d] in [0, %" PRId64 "] and size[%d] in [0, %" PRId64
                      "], got begin %" PRId64 " and size %" PRId64,
                      d, in->dims[d], d, in->dims[d] - begin[d], begin[d], size[d]);
      }
      out.dims[d] = s;
      out.count *= s;
      offset += begin[d] * strides[d];
    }
    if (ok) copy_view_of_input(&c, k->dtype, &out, strides, offset);
  }
  xpu_compute_end(&c);
}

/* The state of a StridedSlice kernel: its five masks. */
typedef struct StridedSliceKernel {
  XpuKernelBase base;
  int64_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask;
} StridedSliceKernel;

static void* create_StridedSlice(TF_OpKernelConstruction* k) {
  StridedSliceKernel* s = xpu_kernel_new(k, sizeof *s, "StridedSlice", 0, "T");
  if (s == NULL) return NULL;
  static const char* const kMasks[] = {"begin_mask", "end_mask", "ellipsis_mask",
                                       "new_axis_mask", "shrink_axis_mask"};
  int64_t* fields[] = {&s->begin_mask, &s->end_mask, &s->ellipsis_mask, &s->new_axis_mask,
                       &s->shrink_axis_mask};
  for (int i = 0; i < 5; i++) {
    *fields[i] = 0;
    if (!xpu_attr_int(k, "StridedSlice", kMasks[i], 0, fields[i])) {
      free(s);
      return NULL;
    }
  }
  return s;
}

static const char* const kStridedSliceNames[] = {"input", "begin", "end", "strides", NULL};

/* compute() of StridedSlice, with TensorFlow's masks: the sparse spec (begin/end/strides with
 * an ellipsis and new axes) is expanded to one (begin, end, stride) per input dim, indices are
 * clamped like Python slices, shrunk dims must be in range. */
static void strided_slice_compute(void* kernel, TF_OpKernelContext* ctx) {
  StridedSliceKernel* k = kernel;
  XpuCompute c;
  int64_t begin[XPU_MAX_RANK], end[XPU_MAX_RANK], step[XPU_MAX_RANK];
  int nb = 0, ne = 0, ns = 0;
  if (!xpu_compute_begin(&c, ctx, "StridedSlice", kStridedSliceNames, 0xeu) ||
      !xpu_check_dtype(&c, 0, k->base.dtype) || !xpu_host_ints(&c, 1, begin, XPU_MAX_RANK, &nb) ||
      !xpu_host_ints(&c, 2, end, XPU_MAX_RANK, &ne) ||
      !xpu_host_ints(&c, 3, step, XPU_MAX_RANK, &ns)) {
    xpu_compute_end(&c);
    return;
  }
  const XpuShape* in = &c.in_shape[0];
  bool ok = true;
  if (nb != ne || nb != ns || c.in_shape[1].rank != 1) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                  "begin, end and strides must be vectors of one length, got %d, %d and %d "
                  "elements", nb, ne, ns);
  }
  int sparse = nb;
  int64_t ellipsis = k->ellipsis_mask, new_axis = k->new_axis_mask;
  if (ok && (ellipsis & (ellipsis - 1)) != 0) {
    ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "Multiple ellipses in slice spec not allowed");
  }
  bool implicit_ellipsis = ellipsis == 0;
  if (implicit_ellipsis) ellipsis = (int64_t)1 << sparse; /* everything after the spec */
  int entries = sparse + (implicit_ellipsis ? 1 : 0);
  /* Per input dim: begin offset, stride, size, shrink. Per output dim: which input dim (-1:
   * a new axis of size 1). */
  int64_t d_begin[XPU_MAX_RANK], d_step[XPU_MAX_RANK], d_size[XPU_MAX_RANK];
  bool d_shrink[XPU_MAX_RANK];
  int out_src[XPU_MAX_RANK];
  int out_rank = 0, full = 0;
  int after_ellipsis_new = 0;
  for (int i = 0; ok && i < entries; i++) {
    if ((ellipsis >> i) & 1) {
      for (int j = i + 1; j < sparse; j++) after_ellipsis_new += (int)((new_axis >> j) & 1);
      break;
    }
  }
  for (int i = 0; ok && i < entries; i++) {
    if ((ellipsis >> i) & 1) {
      int next = in->rank - (entries - i - 1 - after_ellipsis_new);
      if (next > in->rank) next = in->rank;
      for (; full < next; full++) {
        d_begin[full] = 0;
        d_step[full] = 1;
        d_size[full] = in->dims[full];
        d_shrink[full] = false;
        if (out_rank >= XPU_MAX_RANK) break;
        out_src[out_rank++] = full;
      }
      continue;
    }
    if ((new_axis >> i) & 1) {
      if (out_rank >= XPU_MAX_RANK) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "the result would have rank > %d", XPU_MAX_RANK);
        break;
      }
      out_src[out_rank++] = -1;
      continue;
    }
    if (full >= in->rank) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "Index out of range using input dim %d; input has only %d dims", full,
                    in->rank);
      break;
    }
    int64_t n = in->dims[full], s = step[i];
    bool shrink = (k->shrink_axis_mask >> i) & 1;
    if (s == 0) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "strides[%d] must be non-zero", i);
      break;
    }
    if (shrink) {
      int64_t x = begin[i] < 0 ? begin[i] + n : begin[i];
      if (x < 0 || x >= n) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                      "slice index %" PRId64 " of dimension %d out of bounds (size %" PRId64 ")",
                      begin[i], full, n);
        break;
      }
      d_begin[full] = x;
      d_step[full] = 1;
      d_size[full] = 1;
      d_shrink[full] = true;
    } else {
      int64_t lower = s > 0 ? 0 : -1, upper = s > 0 ? n : n - 1;
      int64_t b, e;
      if ((k->begin_mask >> i) & 1) {
        b = s > 0 ? lower : upper;
      } else {
        b = begin[i] < 0 ? begin[i] + n : begin[i];
        b = b < lower ? lower : b > upper ? upper : b;
      }
      if ((k->end_mask >> i) & 1) {
        e = s > 0 ? upper : lower;
      } else {
        e = end[i] < 0 ? end[i] + n : end[i];
        e = e < lower ? lower : e > upper ? upper : e;
      }
      int64_t size = s > 0 ? (e - b + s - 1) / s : (b - e + (-s) - 1) / (-s);
      d_begin[full] = b;
      d_step[full] = s;
      d_size[full] = size > 0 ? size : 0;
      d_shrink[full] = false;
      out_src[out_rank++] = full;
    }
    full++;
  }
  if (ok) {
    /* Input dims past the spec (only with an explicit ellipsis that ran out) stay whole. */
    for (; full < in->rank && out_rank < XPU_MAX_RANK; full++) {
      d_begin[full] = 0;
      d_step[full] = 1;
      d_size[full] = in->dims[full];
      d_shrink[full] = false;
      out_src[out_rank++] = full;
    }
    int64_t in_strides[XPU_MAX_RANK], offset = 0;
    contiguous_strides(in->rank, in->dims, in_strides);
    for (int d = 0; d < in->rank; d++) {
      if (d_size[d] > 0) offset += d_begin[d] * in_strides[d];
    }
    XpuShape out = {.rank = out_rank, .count = 1};
    int64_t src_strides[XPU_MAX_RANK];
    for (int o = 0; o < out_rank; o++) {
      int d = out_src[o];
      out.dims[o] = d < 0 ? 1 : d_size[d];
      src_strides[o] = d < 0 ? 0 : d_step[d] * in_strides[d];
      out.count *= out.dims[o];
    }
    (void)d_shrink;
    copy_view_of_input(&c, k->base.dtype, &out, src_strides, out.count > 0 ? offset : 0);
  }
  xpu_compute_end(&c);
}

/* ---- Tile, BroadcastTo, Pad ------------------------------------------------------------- */

static void* create_Tile(TF_OpKernelConstruction* k) { return create_T(k, "Tile"); }

static const char* const kTileNames[] = {"input", "multiples", NULL};

/* compute() of Tile: input repeated multiples[d] times along each dim d. */
static void tile_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t multiples[XPU_MAX_RANK];
  int n = 0;
  if (xpu_compute_begin(&c, ctx, "Tile", kTileNames, 1u << 1) && xpu_check_dtype(&c, 0, k->dtype) &&
      xpu_host_ints(&c, 1, multiples, XPU_MAX_RANK, &n)) {
    const XpuShape* in = &c.in_shape[0];
    bool ok = true;
    if (n != in->rank || c.in_shape[1].rank != 1) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                    "multiples must be a vector of %d entries (the input's rank), got %d",
                    in->rank, n);
    } else if (2 * in->rank > XPU_MAX_RANK) {
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "inputs of rank above %d are not supported",
                    XPU_MAX_RANK / 2);
    }
    XpuShape out = {.rank = in->rank, .count = 1};
    for (int d = 0; ok && d < in->rank; d++) {
      if (multiples[d] < 0) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "multiples[%d] = %" PRId64 " is negative", d,
                      multiples[d]);
      }
      out.dims[d] = in->dims[d] * multiples[d];
      out.count *= out.dims[d];
    }
    if (ok && xpu_alloc_output(&c, 0, k->dtype, &out)) {
      CopyPlan* p = plan_new(&c, 1);
      if (p != NULL) {
        int64_t in_strides[XPU_MAX_RANK], dims[XPU_MAX_RANK], src[XPU_MAX_RANK],
            dst[XPU_MAX_RANK];
        contiguous_strides(in->rank, in->dims, in_strides);
        for (int d = 0; d < in->rank; d++) {
          dims[2 * d] = multiples[d];
          dims[2 * d + 1] = in->dims[d];
          src[2 * d] = 0;
          src[2 * d + 1] = in_strides[d];
        }
        contiguous_strides(2 * in->rank, dims, dst);
        view_init(&p->views[0], xpu_dtype_size(k->dtype), 2 * in->rank, dims, src, dst,
                  out.count > 0 ? xpu_data(c.in[0]) : NULL, xpu_data(c.out[0]));
        p->count = 1;
        plan_enqueue(&c, p, out.count == 0);
      }
    }
  }
  xpu_compute_end(&c);
}

static void* create_BroadcastTo(TF_OpKernelConstruction* k) { return create_T(k, "BroadcastTo"); }

static const char* const kBroadcastToNames[] = {"input", "shape", NULL};

/* compute() of BroadcastTo: NumPy broadcasting of input to the host-memory shape. */
static void broadcast_to_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  XpuShape out = {.count = 1};
  int n = 0;
  if (xpu_compute_begin(&c, ctx, "BroadcastTo", kBroadcastToNames, 1u << 1) &&
      xpu_check_dtype(&c, 0, k->dtype) && xpu_host_ints(&c, 1, out.dims, XPU_MAX_RANK, &n)) {
    const XpuShape* in = &c.in_shape[0];
    bool ok = true;
    out.rank = n;
    int64_t in_strides[XPU_MAX_RANK], src[XPU_MAX_RANK];
    contiguous_strides(in->rank, in->dims, in_strides);
    if (in->rank > n) ok = false;
    for (int d = 0; ok && d < n; d++) {
      int s = d - (n - in->rank);
      int64_t have = s < 0 ? 1 : in->dims[s];
      if (out.dims[d] < 0 || (have != out.dims[d] && have != 1)) ok = false;
      src[d] = s < 0 || have == 1 ? 0 : in_strides[s];
      out.count *= out.dims[d] < 0 ? 0 : out.dims[d];
    }
    if (!ok) {
      char a[256], b[256];
      xpu_fail(&c, TF_INVALID_ARGUMENT, "Unable to broadcast tensor of shape %s to tensor of "
               "shape %s", xpu_shape_str(in, a, sizeof a), xpu_shape_str(&out, b, sizeof b));
    } else {
      copy_view_of_input(&c, k->dtype, &out, src, 0);
    }
  }
  xpu_compute_end(&c);
}

static void* create_Pad(TF_OpKernelConstruction* k) { return create_T(k, "Pad"); }

static const char* const kPadNames[] = {"input", "paddings", NULL};

/* compute() of Pad: zeros around the input, paddings[d] = (before, after) in host memory. */
static void pad_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t pads[2 * XPU_MAX_RANK];
  int n = 0;
  if (xpu_compute_begin(&c, ctx, "Pad", kPadNames, 1u << 1) && xpu_check_dtype(&c, 0, k->dtype) &&
      host_ints_any(&c, 1, "paddings", pads, 2 * XPU_MAX_RANK, &n)) {
    const XpuShape* in = &c.in_shape[0];
    const XpuShape* ps = &c.in_shape[1];
    bool ok = true;
    if (ps->rank != 2 || ps->dims[0] != in->rank || ps->dims[1] != 2) {
      char a[256];
      ok = xpu_fail(&c, TF_INVALID_ARGUMENT, "paddings must be a matrix of shape [%d, 2], got %s",
                    in->rank, xpu_shape_str(ps, a, sizeof a));
    }
    XpuShape out = {.rank = in->rank, .count = 1};
    for (int d = 0; ok && d < in->rank; d++) {
      if (pads[2 * d] < 0 || pads[2 * d + 1] < 0) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                      "paddings[%d] = (%" PRId64 ", %" PRId64 ") must be non-negative", d,
                      pads[2 * d], pads[2 * d + 1]);
      }
      out.dims[d] = in->dims[d] + pads[2 * d] + pads[2 * d + 1];
      out.count *= out.dims[d];
    }
    if (ok && xpu_alloc_output(&c, 0, k->dtype, &out)) {
      CopyPlan* p = plan_new(&c, 1);
      if (p != NULL) {
        size_t size = xpu_dtype_size(k->dtype);
        int64_t src[XPU_MAX_RANK], dst[XPU_MAX_RANK], offset = 0;
        contiguous_strides(in->rank, in->dims, src);
        contiguous_strides(out.rank, out.dims, dst);
        for (int d = 0; d < in->rank; d++) offset += pads[2 * d] * dst[d];
        p->fill_dst = xpu_data(c.out[0]);
        p->fill_count = out.count;
        if (in->count > 0) {
          view_init(&p->views[0], size, in->rank, in->dims, src, dst, xpu_data(c.in[0]),
                    (char*)xpu_data(c.out[0]) + offset * (int64_t)size);
        } else {
          p->views[0].size = size;
          p->views[0].count = 0;
        }
        p->count = 1;
        plan_enqueue(&c, p, out.count == 0);
      }
    }
  }
  xpu_compute_end(&c);
}

/* ---- ExpandDims, Squeeze ---------------------------------------------------------------- */

static void* create_ExpandDims(TF_OpKernelConstruction* k) { return create_T(k, "ExpandDims"); }

static const char* const kExpandDimsNames[] = {"input", "dim", NULL};

/* compute() of ExpandDims: a dim of size 1 inserted at host-memory `dim` (a copy). */
static void expand_dims_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  int64_t dim = 0;
  int axis = 0;
  if (xpu_compute_begin(&c, ctx, "ExpandDims", kExpandDimsNames, 1u << 1) &&
      xpu_check_dtype(&c, 0, k->dtype) && host_scalar(&c, 1, "dim", &dim) &&
      normalise_axis(&c, "dim", dim, c.in_shape[0].rank, true, &axis)) {
    const XpuShape* in = &c.in_shape[0];
    if (in->rank + 1 > XPU_MAX_RANK) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "the result would have rank %d; at most %d",
               in->rank + 1, XPU_MAX_RANK);
    } else {
      XpuShape out = {.rank = in->rank + 1, .count = in->count};
      for (int d = 0, s = 0; d < out.rank; d++) out.dims[d] = d == axis ? 1 : in->dims[s++];
      copy_reshaped(&c, k->dtype, &out);
    }
  }
  xpu_compute_end(&c);
}

/* The state of a Squeeze kernel: squeeze_dims (empty: every dim of size 1). */
typedef struct SqueezeKernel {
  XpuKernelBase base;
  int count;
  int64_t dims[XPU_MAX_RANK];
} SqueezeKernel;

static void* create_Squeeze(TF_OpKernelConstruction* k) {
  SqueezeKernel* s = xpu_kernel_new(k, sizeof *s, "Squeeze", 0, "T");
  if (s != NULL && !xpu_attr_ints(k, "Squeeze", "squeeze_dims", s->dims, XPU_MAX_RANK, &s->count)) {
    free(s);
    return NULL;
  }
  if (s != NULL && s->count < 0) s->count = 0;
  return s;
}

static const char* const kInputNames[] = {"input", NULL};

/* compute() of Squeeze: drops the listed dims (each of size 1), or every dim of size 1. */
static void squeeze_compute(void* kernel, TF_OpKernelContext* ctx) {
  SqueezeKernel* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, "Squeeze", kInputNames, 0) &&
      xpu_check_dtype(&c, 0, k->base.dtype)) {
    const XpuShape* in = &c.in_shape[0];
    bool drop[XPU_MAX_RANK] = {false};
    bool ok = true;
    for (int i = 0; ok && i < k->count; i++) {
      int d = 0;
      ok = normalise_axis(&c, "squeeze_dims entry", k->dims[i], in->rank, false, &d);
      if (ok && in->dims[d] != 1) {
        ok = xpu_fail(&c, TF_INVALID_ARGUMENT,
                      "Can not squeeze dim[%d], expected a dimension of 1, got %" PRId64, d,
                      in->dims[d]);
      }
      if (ok) drop[d] = true;
    }
    XpuShape out = {.rank = 0, .count = in->count};
    for (int d = 0; ok && d < in->rank; d++) {
      bool gone = k->count > 0 ? drop[d] : in->dims[d] == 1;
      if (!gone) out.dims[out.rank++] = in->dims[d];
    }
    if (ok) copy_reshaped(&c, k->base.dtype, &out);
  }
  xpu_compute_end(&c);
}

/* ---- GatherV2 --------------------------------------------------------------------------- */

/* The state of a GatherV2 kernel. */
typedef struct GatherKernel {
  XpuKernelBase base; /* dtype = Tparams */
  TF_DataType index_type;
} GatherKernel;

static void* create_GatherV2(TF_OpKernelConstruction* k) {
  GatherKernel* g = xpu_kernel_new(k, sizeof *g, "GatherV2", 0, "Tparams");
  int64_t batch_dims = 0;
  if (g != NULL && (!xpu_attr_type(k, "GatherV2", "Tindices", &g->index_type) ||
                    !xpu_attr_int(k, "GatherV2", "batch_dims", 0, &batch_dims))) {
    free(g);
    return NULL;
  }
  if (g != NULL && batch_dims != 0) {
    free(g);
    return xpu_construction_fail(k, "GatherV2: batch_dims = %" PRId64 " is not supported by "
                                 "the XPU kernel (only 0)", batch_dims);
  }
  return g;
}

/* The stream work of GatherV2: params as [outer, n, inner bytes]. */
typedef struct GatherWork {
  const char* params;
  const void* indices;
  bool wide; /* int64 indices */
  char* out;
  int64_t outer, n, inner_bytes, count; /* count: number of indices */
} GatherWork;

/* One task of GatherV2: a slice of the (outer, index) rows. */
static void gather_task(void* ctx, int64_t t) {
  GatherWork* w = ctx;
  int64_t rows = w->outer * w->count, begin, end;
  xpu_task_range(rows, xpu_task_count(rows, XPU_PARALLEL_GRAIN / 64), t, &begin, &end);
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / w->count, j = r % w->count;
    int64_t index = w->wide ? ((const int64_t*)w->indices)[j] : ((const int32_t*)w->indices)[j];
    char* dst = w->out + r * w->inner_bytes;
    if (index < 0 || index >= w->n) {
      memset(dst, 0, (size_t)w->inner_bytes); /* out of range: zeros, as on a GPU */
    } else {
      memcpy(dst, w->params + (o * w->n + index) * w->inner_bytes, (size_t)w->inner_bytes);
    }
  }
}

/* Stream work of GatherV2. */
static TF_Code gather_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  GatherWork* w = arg;
  int64_t rows = w->outer * w->count;
  xpu_parallel_for(xpu_task_count(rows, XPU_PARALLEL_GRAIN / 64), gather_task, w);
  return TF_OK;
}

static const char* const kGatherNames[] = {"params", "indices", "axis", NULL};

/* compute() of GatherV2: slices of params along host-memory `axis` picked by indices. */
static void gather_compute(void* kernel, TF_OpKernelContext* ctx) {
  GatherKernel* k = kernel;
  XpuCompute c;
  int64_t axis_value = 0;
  int axis = 0;
  if (xpu_compute_begin(&c, ctx, "GatherV2", kGatherNames, 1u << 2) &&
      xpu_check_dtype(&c, 0, k->base.dtype) && xpu_check_dtype(&c, 1, k->index_type) &&
      host_scalar(&c, 2, "axis", &axis_value)) {
    const XpuShape* params = &c.in_shape[0];
    const XpuShape* indices = &c.in_shape[1];
    if (params->rank == 0) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "params must be at least 1-D");
    } else if (normalise_axis(&c, "axis", axis_value, params->rank, false, &axis)) {
      if (params->rank - 1 + indices->rank > XPU_MAX_RANK) {
        xpu_fail(&c, TF_INVALID_ARGUMENT, "the result would have rank %d; at most %d",
                 params->rank - 1 + indices->rank, XPU_MAX_RANK);
      } else {
        XpuShape out = {.rank = 0, .count = 1};
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= params->dims[d];
        for (int d = axis + 1; d < params->rank; d++) inner *= params->dims[d];
        for (int d = 0; d < axis; d++) out.dims[out.rank++] = params->dims[d];
        for (int d = 0; d < indices->rank; d++) out.dims[out.rank++] = indices->dims[d];
        for (int d = axis + 1; d < params->rank; d++) out.dims[out.rank++] = params->dims[d];
        for (int d = 0; d < out.rank; d++) out.count *= out.dims[d];
        if (xpu_alloc_output(&c, 0, k->base.dtype, &out)) {
          if (out.count == 0) {
            xpu_compute_enqueue(&c, NULL, NULL, NULL);
          } else {
            GatherWork w = {.params = xpu_data(c.in[0]), .indices = xpu_data(c.in[1]),
                            .wide = k->index_type == TF_INT64, .out = xpu_data(c.out[0]),
                            .outer = outer, .n = params->dims[axis],
                            .inner_bytes = inner * (int64_t)xpu_dtype_size(k->base.dtype),
                            .count = indices->count};
            xpu_compute_enqueue_work(&c, gather_work, &w, sizeof w);
          }
        }
      }
    }
  }
  xpu_compute_end(&c);
}

/* ---- Shape, Range ----------------------------------------------------------------------- */

static void* create_Shape(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Shape", 0, "out_type");
}

/* compute() of Shape: the input's dims as an int32 or int64 vector. The output is registered
 * in host memory (HostMemory("output"), as TensorFlow's own Shape kernels are): the runtime
 * hands over host memory, written here during compute() with no stream work, and the input's
 * data is not read. TensorFlow keeps int32 shape tensors on the host and refuses a Shape whose
 * int32 output a device kernel puts in device memory. */
static void shape_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  if (xpu_compute_begin(&c, ctx, "Shape", kInputNames, 0)) {
    const XpuShape* in = &c.in_shape[0];
    XpuShape out = {.rank = 1, .dims = {in->rank}, .count = in->rank};
    bool wide = k->dtype == TF_INT64;
    for (int d = 0; d < in->rank && !wide; d++) {
      if (in->dims[d] > INT32_MAX) {
        xpu_fail(&c, TF_INVALID_ARGUMENT, "dim %d (%" PRId64 ") does not fit out_type int32", d,
                 in->dims[d]);
        xpu_compute_end(&c);
        return;
      }
    }
    if (xpu_alloc_output(&c, 0, k->dtype, &out) && in->rank > 0) {
      unsigned char* dst = xpu_data(c.out[0]);
      for (int d = 0; d < in->rank; d++) {
        if (wide) memcpy(dst + 8 * d, &in->dims[d], 8);
        else { int32_t v = (int32_t)in->dims[d]; memcpy(dst + 4 * d, &v, 4); }
      }
    }
  }
  xpu_compute_end(&c);
}

/* The stream work of Range: output[i] = start + i * delta. */
typedef struct RangeWork {
  TF_DataType dtype;
  void* out;
  int64_t count;
  double fstart, fdelta;
  int64_t istart, idelta;
} RangeWork;

static TF_Code range_work(void* arg, char* message, size_t size) {
  (void)message;
  (void)size;
  RangeWork* w = arg;
  switch (w->dtype) {
    case TF_FLOAT: {
      float* restrict o = w->out;
      float s = (float)w->fstart, d = (float)w->fdelta;
      for (int64_t i = 0; i < w->count; i++) o[i] = s + (float)i * d;
      break;
    }
    case TF_DOUBLE: {
      double* restrict o = w->out;
      for (int64_t i = 0; i < w->count; i++) o[i] = w->fstart + (double)i * w->fdelta;
      break;
    }
    case TF_INT32: {
      int32_t* restrict o = w->out;
      for (int64_t i = 0; i < w->count; i++) o[i] = (int32_t)(w->istart + i * w->idelta);
      break;
    }
    default: {
      int64_t* restrict o = w->out;
      for (int64_t i = 0; i < w->count; i++) o[i] = w->istart + i * w->idelta;
      break;
    }
  }
  return TF_OK;
}

static void* create_Range(TF_OpKernelConstruction* k) {
  return xpu_kernel_new(k, sizeof(XpuKernelBase), "Range", 0, "Tidx");
}

static const char* const kRangeNames[] = {"start", "limit", "delta", NULL};

/* Reads host-memory scalar input i of type dt as a double and (for integers) an int64. */
static bool host_number(XpuCompute* c, int i, TF_DataType dt, double* f, int64_t* n) {
  if (!xpu_check_dtype(c, i, dt)) return false;
  if (c->in_shape[i].count != 1) {
    return xpu_fail(c, TF_INVALID_ARGUMENT, "%s must be a scalar", kRangeNames[i]);
  }
  const void* p = TF_TensorData(c->in[i]);
  switch (dt) {
    case TF_FLOAT: *f = *(const float*)p; *n = 0; break;
    case TF_DOUBLE: *f = *(const double*)p; *n = 0; break;
    case TF_INT32: *n = *(const int32_t*)p; *f = (double)*n; break;
    default: *n = *(const int64_t*)p; *f = (double)*n; break;
  }
  return true;
}

/* compute() of Range: start, limit and delta in host memory; the values are written on the
 * device. */
static void range_compute(void* kernel, TF_OpKernelContext* ctx) {
  XpuKernelBase* k = kernel;
  XpuCompute c;
  double fs, fl, fd;
  int64_t is, il, id;
  if (xpu_compute_begin(&c, ctx, "Range", kRangeNames, 0x7u) &&
      host_number(&c, 0, k->dtype, &fs, &is) && host_number(&c, 1, k->dtype, &fl, &il) &&
      host_number(&c, 2, k->dtype, &fd, &id)) {
    bool integer = k->dtype == TF_INT32 || k->dtype == TF_INT64;
    int64_t count = 0;
    if (fd == 0) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "Requires delta != 0");
    } else if (fd > 0 ? fs > fl : fs < fl) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "Requires start %s limit when delta %s 0: %g/%g",
               fd > 0 ? "<=" : ">=", fd > 0 ? ">" : "<", fs, fl);
    } else if (!(fabs((fl - fs) / fd) < 9.0e18)) {
      xpu_fail(&c, TF_INVALID_ARGUMENT, "Requires a finite range of fewer than 2^63 values");
    } else {
      if (integer) {
        uint64_t span = il >= is ? (uint64_t)il - (uint64_t)is : (uint64_t)is - (uint64_t)il;
        uint64_t step = id > 0 ? (uint64_t)id : 0 - (uint64_t)id;
        count = (int64_t)((span + step - 1) / step);
      } else {
        count = (int64_t)ceil(fabs((fl - fs) / fd));
      }
      XpuShape out = {.rank = 1, .dims = {count}, .count = count};
      if (xpu_alloc_output(&c, 0, k->dtype, &out)) {
        if (count == 0) {
          xpu_compute_enqueue(&c, NULL, NULL, NULL);
        } else {
          RangeWork w = {.dtype = k->dtype, .out = xpu_data(c.out[0]), .count = count,
                         .fstart = fs, .fdelta = fd, .istart = is, .idelta = id};
          xpu_compute_enqueue_work(&c, range_work, &w, sizeof w);
        }
      }
    }
  }
  xpu_compute_end(&c);
}

/* ---- registration ----------------------------------------------------------------------- */

static const TF_DataType kIndexTypes[] = {TF_INT32, TF_INT64, 0};

#define DEF(NAME, COMPUTE, TYPES, H0, H1) \
  {#NAME, create_##NAME, COMPUTE, "T", TYPES, NULL, NULL, {H0, H1, NULL}}
static const XpuKernelDef kDefs[] = {
    DEF(ConcatV2, concat_compute, xpu_types_FIXED, "axis", NULL),
    DEF(Pack, pack_compute, xpu_types_FIXED, NULL, NULL),
    DEF(Split, split_compute, xpu_types_FIXED, "split_dim", NULL),
    {"SplitV", create_SplitV, splitv_compute, "T", xpu_types_FIXED, "Tlen", kIndexTypes,
     {"size_splits", "split_dim", NULL}},
    DEF(Slice, slice_compute, xpu_types_FIXED, "begin", "size"),
    {"StridedSlice", create_StridedSlice, strided_slice_compute, "T", xpu_types_FIXED, "Index",
     kIndexTypes, {"begin", "end", "strides"}},
    DEF(Tile, tile_compute, xpu_types_FIXED, "multiples", NULL),
    DEF(BroadcastTo, broadcast_to_compute, xpu_types_FIXED, "shape", NULL),
    DEF(Pad, pad_compute, xpu_types_FIXED, "paddings", NULL),
    DEF(ExpandDims, expand_dims_compute, xpu_types_FIXED, "dim", NULL),
    DEF(Squeeze, squeeze_compute, xpu_types_FIXED, NULL, NULL),
    {"GatherV2", create_GatherV2, gather_compute, "Tparams", xpu_types_FIXED, "Tindices",
     kIndexTypes, {"axis", NULL}},
    {"Shape", create_Shape, shape_compute, "out_type", kIndexTypes, NULL, NULL,
     {"output", NULL}},
    {"Range", create_Range, range_compute, "Tidx", xpu_types_N, NULL, NULL,
     {"start", "limit", "delta"}},
};

void xpu_register_array_kernels(void) {
  xpu_register_defs(kDefs, sizeof kDefs / sizeof kDefs[0]);
}
