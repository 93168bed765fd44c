/* xpu_kernels_broadcast.c: shapes and NumPy broadcasting for the XPU kernels.
 *
 * Holds:
 *   xpu_shape_str       formats a shape as "[2,3]" for messages
 *   xpu_same_shape      whether two shapes are equal (a binary op's inputs then need no
 *                       broadcast walk)
 *   xpu_broadcast       NumPy broadcasting of up to three shapes, collapsed into runs
 *                       (XpuBroadcast: dims and per-operand strides)
 *   xpu_broadcast_walk  walks a range of output elements in contiguous runs
 * The binary ops, Select and SelectV2 (xpu_kernels_elementwise.c) and BatchMatMulV2's batch
 * dims (xpu_kernels_matmul.c) broadcast with them; Transpose (xpu_kernels_shape.c) walks its
 * input with xpu_broadcast_walk.
 */
#include "xpu_kernels.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char* xpu_shape_str(const XpuShape* s, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < s->rank && used < size; d++) {
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", s->dims[d]);
  }
  if (used < size) snprintf(buf + used, size - used, "]");
  if (used >= size && size > 4) memcpy(buf + size - 4, "...", 4);
  return buf;
}

bool xpu_same_shape(const XpuShape* a, const XpuShape* b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++) {
    if (a->dims[d] != b->dims[d]) return false;
  }
  return true;
}

bool xpu_broadcast(int n, const XpuShape* const* shapes, XpuShape* out_shape, XpuBroadcast* bc) {
  int rank = 0;
  for (int k = 0; k < n; k++) {
    if (shapes[k]->rank > rank) rank = shapes[k]->rank;
  }
  /* dims[k][d]: operand k's dim under output dim d (1 where it has fewer dims). */
  int64_t dims[3][XPU_MAX_RANK];
  out_shape->rank = rank;
  out_shape->count = 1;
  for (int d = 0; d < rank; d++) {
    int64_t out = 1;
    for (int k = 0; k < n; k++) {
      int pad = rank - shapes[k]->rank;
      dims[k][d] = d < pad ? 1 : shapes[k]->dims[d - pad];
      if (dims[k][d] == 1) continue;
      if (out == 1) out = dims[k][d];
      else if (dims[k][d] != out) return false;
    }
    out_shape->dims[d] = out;
    out_shape->count *= out;
  }
  memset(bc, 0, sizeof *bc);
  bc->operands = n;
  bc->count = out_shape->count;
  /* Collapse: skip size-1 output dims, merge neighbours with the same broadcast pattern. */
  unsigned prev_mask = 0;
  for (int d = 0; d < rank; d++) {
    int64_t out = out_shape->dims[d];
    if (out == 1) continue;
    unsigned mask = 0;
    for (int k = 0; k < n; k++) mask |= (dims[k][d] == 1 ? 1u : 0u) << k;
    if (bc->rank > 0 && mask == prev_mask) {
      bc->dims[bc->rank - 1] *= out;
    } else {
      bc->dims[bc->rank] = out;
      for (int k = 0; k < n; k++) bc->strides[k][bc->rank] = (mask >> k) & 1u; /* temp flag */
      bc->rank++;
    }
    prev_mask = mask;
  }
  for (int k = 0; k < n; k++) {
    int64_t running = 1;
    for (int d = bc->rank - 1; d >= 0; d--) {
      bool broadcast = bc->strides[k][d] != 0;
      bc->strides[k][d] = broadcast ? 0 : running;
      if (!broadcast) running *= bc->dims[d];
    }
  }
  return true;
}

bool xpu_broadcast_walk(const XpuBroadcast* bc, int64_t begin, int64_t end, XpuBroadcastRun run,
                        void* ctx) {
  int64_t offs[3] = {0, 0, 0}, inner[3] = {0, 0, 0};
  if (begin >= end) return true;
  int r = bc->rank;
  if (r == 0) return run(ctx, offs, inner, 0, 1);
  int64_t idx[XPU_MAX_RANK];
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; d--) {
    idx[d] = rem % bc->dims[d];
    rem /= bc->dims[d];
  }
  for (int k = 0; k < bc->operands; k++) {
    for (int d = 0; d < r; d++) offs[k] += idx[d] * bc->strides[k][d];
    inner[k] = bc->strides[k][r - 1];
  }
  bool ok = true;
  int64_t pos = begin;
  while (pos < end) {
    int64_t count = bc->dims[r - 1] - idx[r - 1];
    if (count > end - pos) count = end - pos;
    if (!run(ctx, offs, inner, pos, count)) ok = false;
    pos += count;
    idx[r - 1] += count;
    for (int k = 0; k < bc->operands; k++) offs[k] += count * inner[k];
    for (int d = r - 1; d > 0 && idx[d] == bc->dims[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < bc->operands; k++) {
        offs[k] += bc->strides[k][d - 1] - bc->dims[d] * bc->strides[k][d];
      }
    }
  }
  return ok;
}
