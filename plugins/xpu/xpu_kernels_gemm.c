/* xpu_kernels_gemm.c: the GEMM engine behind MatMul, BatchMatMulV2 and Conv2D (float and
 * double).
 *
 * The classic cache-blocked structure (Goto / BLIS): C is cut into tiles of MC x NC, each a
 * task for the helper-thread pool. A task walks K in blocks of about equal depth, at most KC
 * (xpu_gemm); for each block it packs the B block (KC x NC) into micro-panels of NR columns
 * and the A block (MC x KC) into micro-panels of MR rows, zero-padded, so that the
 * micro-kernel reads both sequentially.
 * The micro-kernel keeps an MR x NR block of C in vector registers and, for every k, adds
 * the outer product of an A column (broadcast scalars) and a B row (NR / lanes vectors):
 * MR * NR / lanes fused multiply-adds per k. A micro-panel of A (MR x KC, the broadcast
 * operand; 12 KiB of floats on AVX-512) stays in L1 while the B micro-panels of the packed
 * B block (KC x NC, in L2) stream past it; the other order kept a 32 KiB B micro-panel, all
 * of L1, beside the streaming A panels. Row-major operands are packed with vector moves: B row by row in
 * NR-wide pieces, A through 4 x 4 (2 x 2 for double) register transposes.
 *
 * The micro-kernels are written with GCC vector extensions and compiled three times: for
 * AVX-512F (zmm, 32 registers), for AVX2+FMA (ymm, 16 registers) and for baseline x86-64 /
 * any other CPU (16-byte vectors); the best one the CPU supports is picked at run time
 * (XPU_KERNEL_ISA=generic|avx2|avx512 forces one, for tests), so the plugin needs no
 * -march flag. Each task packs its own blocks (a B block is packed once per row group of
 * tiles, see gemm_task), which keeps tasks independent: every element of C is computed
 * by one task, in the same order, whatever the number of threads, so results are
 * deterministic. The KC blocking and fused multiply-adds make float results differ from a
 * naive dot product by normal rounding (relative error ~ sqrt(k) * 2^-24). A task covers a
 * group of row tiles of one tile column (gemm_task), so that a packed B block serves them
 * all.
 *
 * Conv2D's A operand is its input seen through im2col (XpuConvGeometry): the A packer reads
 * filter taps straight from the NHWC input (zeros in the padding), so the im2col matrix is
 * never materialized.
 */
#include "xpu_kernels.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- micro-kernels ---------------------------------------------------------------------- */

/* acc[MR x NR] = sum_p a[p * MR + i] * b[p * NR + j]; then C = acc (or C += acc). */
typedef void (*MicroKernel)(int64_t kc, const void* a, const void* b, void* c, int64_t ldc,
                            int accumulate);

/* Defines micro-kernel NAME for element type T, vector type V of W lanes, MR rows and NV
 * vectors per row (NR = NV * W), compiled with target attribute TARGET. */
#define DEFINE_MICRO_KERNEL(NAME, TARGET, T, V, W, MR, NV)                               \
  TARGET static void NAME(int64_t kc, const void* av, const void* bv, void* cv,          \
                          int64_t ldc, int accumulate) {                                 \
    const T* a = av;                                                                     \
    const T* b = bv;                                                                     \
    T* c = cv;                                                                           \
    V acc[MR][NV];                                                                       \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = (V){0};           \
    }                                                                                    \
    for (int64_t p = 0; p < kc; p++) {                                                   \
      V bq[NV];                                                                          \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                             \
        bq[v] = *(const V*)(b + p * (NV * W) + v * W);                                   \
      }                                                                                  \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                            \
        T s = a[p * MR + i];                                                             \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] += s * bq[v];     \
      }                                                                                  \
    }                                                                                    \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                              \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                             \
        T* dst = c + i * ldc + v * W;                                                    \
        V t = acc[i][v];                                                                 \
        if (accumulate) {                                                                \
          V old;                                                                         \
          memcpy(&old, dst, sizeof old);                                                 \
          t += old;                                                                      \
        }                                                                                \
        memcpy(dst, &t, sizeof t);                                                       \
      }                                                                                  \
    }                                                                                    \
  }

/* Vector types; may_alias because they are loaded from float / double buffers. */
typedef float f32x16 __attribute__((vector_size(64), may_alias));
typedef double f64x8 __attribute__((vector_size(64), may_alias));
typedef float f32x8 __attribute__((vector_size(32), may_alias));
typedef double f64x4 __attribute__((vector_size(32), may_alias));
typedef float f32x4 __attribute__((vector_size(16), may_alias));
typedef double f64x2 __attribute__((vector_size(16), may_alias));

/* -std=c11 turns off floating-point contraction; the micro-kernels want a * b + c fused. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

#if defined(__x86_64__) || defined(__i386__)
#define XPU_GEMM_X86 1
#define TARGET_AVX512 __attribute__((target("avx512f")))
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
/* AVX-512: 12 x 32 floats (24 zmm accumulators), 12 x 16 doubles. */
DEFINE_MICRO_KERNEL(ukr_f32_avx512, TARGET_AVX512, float, f32x16, 16, 12, 2)
DEFINE_MICRO_KERNEL(ukr_f64_avx512, TARGET_AVX512, double, f64x8, 8, 12, 2)
/* AVX2: 6 x 16 floats (12 ymm accumulators), 6 x 8 doubles. */
DEFINE_MICRO_KERNEL(ukr_f32_avx2, TARGET_AVX2, float, f32x8, 8, 6, 2)
DEFINE_MICRO_KERNEL(ukr_f64_avx2, TARGET_AVX2, double, f64x4, 4, 6, 2)
#endif
/* Any CPU (SSE2 on x86-64): 6 x 8 floats, 6 x 4 doubles in 16-byte vectors. */
DEFINE_MICRO_KERNEL(ukr_f32_generic, , float, f32x4, 4, 6, 2)
DEFINE_MICRO_KERNEL(ukr_f64_generic, , double, f64x2, 2, 6, 2)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* A micro-kernel with its shape and the blocking that suits it. */
typedef struct GemmKernel {
  MicroKernel ukr;
  int mr, nr;
  int64_t kc, mc, nc;
} GemmKernel;

/* The micro-kernels of one instruction set. */
typedef struct GemmArch {
  const char* name;
  GemmKernel f32, f64;
} GemmArch;

static const GemmArch kArchGeneric = {
    "generic", {ukr_f32_generic, 6, 8, 256, 96, 512}, {ukr_f64_generic, 6, 4, 256, 96, 256}};
#ifdef XPU_GEMM_X86
static const GemmArch kArchAvx2 = {
    "avx2", {ukr_f32_avx2, 6, 16, 256, 144, 512}, {ukr_f64_avx2, 6, 8, 256, 96, 512}};
static const GemmArch kArchAvx512 = {
    "avx512", {ukr_f32_avx512, 12, 32, 256, 192, 512}, {ukr_f64_avx512, 12, 16, 256, 144, 512}};
#endif

static _Atomic(const GemmArch*) g_arch;

/* The micro-kernels for this CPU (or XPU_KERNEL_ISA), chosen once. */
static const GemmArch* gemm_arch(void) {
  const GemmArch* arch = atomic_load(&g_arch);
  if (arch != NULL) return arch;
  arch = &kArchGeneric;
#ifdef XPU_GEMM_X86
  const char* forced = getenv("XPU_KERNEL_ISA");
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (forced != NULL && strcmp(forced, "generic") == 0) {
    avx512 = avx2 = false;
  } else if (forced != NULL && strcmp(forced, "avx2") == 0) {
    avx512 = false;
  }
  if (avx512) arch = &kArchAvx512;
  else if (avx2) arch = &kArchAvx2;
#endif
  atomic_store(&g_arch, arch);
  return arch;
}

const char* xpu_gemm_isa(void) { return gemm_arch()->name; }

bool xpu_kernel_isa_has_avx2(void) { return gemm_arch() != &kArchGeneric; }

/* ---- packing ---------------------------------------------------------------------------- */

/* The tallest micro-panel of any micro-kernel above (AVX-512: 12 rows). */
#define XPU_GEMM_MAX_MR 12

/* The full nr-wide pieces of row p of a B block, each to its panel, as copies of constant
 * size (inlined vector moves instead of a memcpy call per piece). */
#define PACK_B_PIECES(NR) \
  for (; jp < full; jp += NR) memcpy(d + jp * kc, src + jp, NR * sizeof *src)

/* Defines the packers for element type T (suffix S):
 *   pack_b_S: B rows [k0, k0 + kc) x columns [j0, j0 + nc) into micro-panels of nr columns,
 *             each kc x nr row-major, the last padded with zeros;
 *   pack_a_S: A rows [i0, i0 + mc) x columns [k0, k0 + kc) into micro-panels of mr rows,
 *             each kc x mr (column by column), the last padded with zeros;
 *   pack_conv_S: the same for the im2col view of a convolution input. */
#define DEFINE_PACKERS(S, T)                                                               \
  static void pack_b_##S(const T* b, int64_t rs, int64_t cs, int64_t k0, int64_t kc,       \
                         int64_t j0, int64_t nc, int nr, T* dst) {                         \
    if (cs == 1) {                                                                         \
      /* Row by row: each row of the block is read once, in order, and its nr-wide pieces \
       * go to their panels; a full piece is a copy of constant size (inlined). */        \
      int64_t full = nc / nr * nr;                                                         \
      for (int64_t p = 0; p < kc; p++) {                                                   \
        const T* src = b + (k0 + p) * rs + j0;                                             \
        T* d = dst + p * nr;                                                               \
        int64_t jp = 0;                                                                    \
        switch (nr) {                                                                      \
          case 32: PACK_B_PIECES(32); break;                                               \
          case 16: PACK_B_PIECES(16); break;                                               \
          case 8: PACK_B_PIECES(8); break;                                                 \
          case 4: PACK_B_PIECES(4); break;                                                 \
          default: break;                                                                  \
        }                                                                                  \
        for (; jp < nc; jp += nr) {                                                        \
          int64_t w = nc - jp < nr ? nc - jp : nr;                                         \
          for (int64_t j = 0; j < nr; j++) d[jp * kc + j] = j < w ? src[jp + j] : 0;       \
        }                                                                                  \
      }                                                                                    \
      return;                                                                              \
    }                                                                                      \
    for (int64_t jp = 0; jp < nc; jp += nr, dst += kc * nr) {                              \
      int64_t w = nc - jp < nr ? nc - jp : nr;                                             \
      const T* src = b + k0 * rs + (j0 + jp) * cs;                                         \
      for (int64_t j = 0; j < nr; j++) {                                                   \
        if (j < w) {                                                                       \
          for (int64_t p = 0; p < kc; p++) dst[p * nr + j] = src[p * rs + j * cs];         \
        } else {                                                                           \
          for (int64_t p = 0; p < kc; p++) dst[p * nr + j] = 0;                            \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  static void pack_rows_##S(const T* const* rows, int64_t h, int64_t run, int mr, T* d) {   \
    /* Columns [0, run) of h rows (NULL: a row of zeros) into a micro-panel: element q of \
     * row i to d[q * mr + i]; rows past h are zeros. Groups of whole rows go through the  \
     * register transposes. */                                                            \
    enum { L = 16 / sizeof(T) };                                                           \
    int64_t blocks = run / L * L, i = 0;                                                   \
    while (i < h) {                                                                        \
      int width = 0;                                                                       \
      if (i + L <= h) {                                                                    \
        width = L;                                                                         \
        for (int k = 0; k < L; k++) width = rows[i + k] != NULL ? width : 0;               \
      }                                                                                    \
      if (width == 0 && i + 2 <= h && rows[i] != NULL && rows[i + 1] != NULL) width = 2;   \
      if (width == 0) {                                                                    \
        const T* r = rows[i];                                                              \
        for (int64_t q = 0; q < run; q++) d[q * mr + i] = r != NULL ? r[q] : (T)0;         \
        i++;                                                                               \
        continue;                                                                          \
      }                                                                                    \
      int64_t q = 0;                                                                       \
      for (; q < blocks; q += L) {                                                         \
        if (width == L) transpose_rows_##S(rows + i, q, d + q * mr + i, mr);               \
        else pair_rows_##S(rows + i, q, d + q * mr + i, mr);                               \
      }                                                                                    \
      for (; q < run; q++) {                                                               \
        for (int k = 0; k < width; k++) d[q * mr + i + k] = rows[i + k][q];                \
      }                                                                                    \
      i += width;                                                                          \
    }                                                                                      \
    for (; i < mr; i++) {                                                                  \
      for (int64_t q = 0; q < run; q++) d[q * mr + i] = 0;                                 \
    }                                                                                      \
  }                                                                                        \
  static void pack_a_##S(const T* a, int64_t rs, int64_t cs, int64_t i0, int64_t mc,       \
                         int64_t k0, int64_t kc, int mr, T* dst) {                         \
    for (int64_t ip = 0; ip < mc; ip += mr, dst += kc * mr) {                              \
      int64_t h = mc - ip < mr ? mc - ip : mr;                                             \
      const T* src = a + (i0 + ip) * rs + k0 * cs;                                         \
      if (cs == 1) { /* rows in order, through the register transposes */                 \
        const T* rows[XPU_GEMM_MAX_MR];                                                    \
        for (int64_t i = 0; i < h; i++) rows[i] = src + i * rs;                            \
        pack_rows_##S(rows, h, kc, mr, dst);                                               \
      } else {                                                                             \
        for (int64_t p = 0; p < kc; p++) {                                                 \
          for (int64_t i = 0; i < h; i++) dst[p * mr + i] = src[i * rs + p * cs];          \
          for (int64_t i = h; i < mr; i++) dst[p * mr + i] = 0;                            \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  static void pack_conv_##S(const T* x, const XpuConvGeometry* g, int64_t i0, int64_t mc,  \
                            int64_t k0, int64_t kc, int mr, T* dst) {                      \
    /* Row r of the im2col matrix is output pixel (n, oh, ow); its column p is tap        \
     * (kh, kw) and input channel ch. A micro-panel holds mr consecutive pixels, and for  \
     * one column their values are side by side in dst: so the panel is filled tap by    \
     * tap, each pixel's window corner and image computed once, with no division. */      \
    int64_t pixels = g->out_h * g->out_w, image_size = g->in_h * g->in_w * g->in_c;        \
    int64_t n = i0 / pixels, oh = i0 % pixels / g->out_w, ow = i0 % g->out_w;             \
    int64_t tap0 = k0 / g->in_c, ch0 = k0 % g->in_c;                                       \
    int64_t ih0[XPU_GEMM_MAX_MR], iw0[XPU_GEMM_MAX_MR];                                    \
    const T* img[XPU_GEMM_MAX_MR];                                                         \
    for (int64_t ip = 0; ip < mc; ip += mr, dst += kc * mr) {                              \
      int64_t h = mc - ip < mr ? mc - ip : mr;                                             \
      /* The panel's pixels lie on one output row: a tap reads them at a fixed step. */   \
      bool one_row = ow + h <= g->out_w;                                                   \
      int64_t step = g->stride_w * g->in_c;                                                \
      for (int64_t i = 0; i < h; i++) {                                                    \
        img[i] = x + n * image_size;                                                       \
        ih0[i] = oh * g->stride_h - g->pad_top;                                            \
        iw0[i] = ow * g->stride_w - g->pad_left;                                           \
        if (++ow == g->out_w) {                                                            \
          ow = 0;                                                                          \
          if (++oh == g->out_h) {                                                          \
            oh = 0;                                                                        \
            n++;                                                                           \
          }                                                                                \
        }                                                                                  \
      }                                                                                    \
      int64_t kh = tap0 / g->k_w, kw = tap0 % g->k_w, ch = ch0;                            \
      for (int64_t p = 0; p < kc; ch = 0) {                                                \
        int64_t run = g->in_c - ch < kc - p ? g->in_c - ch : kc - p;                       \
        int64_t dh = kh * g->dil_h, dw = kw * g->dil_w;                                    \
        T* d = dst + p * mr;                                                               \
        int64_t ih = ih0[0] + dh, iw_first = iw0[0] + dw, iw_last = iw0[h - 1] + dw;       \
        if (one_row && ih >= 0 && ih < g->in_h && iw_first >= 0 && iw_last < g->in_w) {    \
          /* Every pixel's tap inside the image, at a fixed step: an h x run block of A. */ \
          const T* src = img[0] + (ih * g->in_w + iw_first) * g->in_c + ch;                \
          if (run >= 16 / (int64_t)sizeof(T)) {                                            \
            pack_a_##S(src, step, 1, 0, h, 0, run, mr, d);                                 \
          } else {                                                                         \
            for (int64_t q = 0; q < run; q++) {                                            \
              for (int64_t i = 0; i < h; i++) d[q * mr + i] = src[i * step + q];           \
              for (int64_t i = h; i < mr; i++) d[q * mr + i] = 0;                          \
            }                                                                              \
          }                                                                                \
        } else {                                                                           \
          const T* rows[XPU_GEMM_MAX_MR];                                                  \
          for (int64_t i = 0; i < h; i++) {                                                \
            int64_t ihi = ih0[i] + dh, iwi = iw0[i] + dw;                                  \
            bool inside = ihi >= 0 && ihi < g->in_h && iwi >= 0 && iwi < g->in_w;          \
            rows[i] = inside ? img[i] + (ihi * g->in_w + iwi) * g->in_c + ch : NULL;       \
          }                                                                                \
          pack_rows_##S(rows, h, run, mr, d);                                              \
        }                                                                                  \
        p += run;                                                                          \
        if (++kw == g->k_w) {                                                              \
          kw = 0;                                                                          \
          kh++;                                                                            \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }
/* Transposes a square block of 16-byte vectors: the vector at r[k] + q (k < L) becomes
 * column k of L rows, dst + c * ld + k for c < L. */
static inline void transpose_rows_f32(const float* const* r, int64_t q, float* dst, int64_t ld) {
  f32x4 r0, r1, r2, r3;
  memcpy(&r0, r[0] + q, sizeof r0);
  memcpy(&r1, r[1] + q, sizeof r1);
  memcpy(&r2, r[2] + q, sizeof r2);
  memcpy(&r3, r[3] + q, sizeof r3);
  typedef int i32x4 __attribute__((vector_size(16)));
  f32x4 t0 = __builtin_shuffle(r0, r1, (i32x4){0, 4, 1, 5});
  f32x4 t1 = __builtin_shuffle(r0, r1, (i32x4){2, 6, 3, 7});
  f32x4 t2 = __builtin_shuffle(r2, r3, (i32x4){0, 4, 1, 5});
  f32x4 t3 = __builtin_shuffle(r2, r3, (i32x4){2, 6, 3, 7});
  f32x4 c0 = __builtin_shuffle(t0, t2, (i32x4){0, 1, 4, 5});
  f32x4 c1 = __builtin_shuffle(t0, t2, (i32x4){2, 3, 6, 7});
  f32x4 c2 = __builtin_shuffle(t1, t3, (i32x4){0, 1, 4, 5});
  f32x4 c3 = __builtin_shuffle(t1, t3, (i32x4){2, 3, 6, 7});
  memcpy(dst, &c0, sizeof c0);
  memcpy(dst + ld, &c1, sizeof c1);
  memcpy(dst + 2 * ld, &c2, sizeof c2);
  memcpy(dst + 3 * ld, &c3, sizeof c3);
}

static inline void transpose_rows_f64(const double* const* r, int64_t q, double* dst,
                                      int64_t ld) {
  f64x2 r0, r1;
  memcpy(&r0, r[0] + q, sizeof r0);
  memcpy(&r1, r[1] + q, sizeof r1);
  typedef long long i64x2 __attribute__((vector_size(16)));
  f64x2 c0 = __builtin_shuffle(r0, r1, (i64x2){0, 2});
  f64x2 c1 = __builtin_shuffle(r0, r1, (i64x2){1, 3});
  memcpy(dst, &c0, sizeof c0);
  memcpy(dst + ld, &c1, sizeof c1);
}

/* Two rows of one 16-byte vector each (at r[0] + q and r[1] + q) become L pairs: element c
 * of both goes to dst + c * ld, side by side (the rows a transpose of L leaves over when mr
 * is 6). */
static inline void pair_rows_f32(const float* const* r, int64_t q, float* dst, int64_t ld) {
  f32x4 r0, r1;
  memcpy(&r0, r[0] + q, sizeof r0);
  memcpy(&r1, r[1] + q, sizeof r1);
  typedef int i32x4 __attribute__((vector_size(16)));
  f32x4 lo = __builtin_shuffle(r0, r1, (i32x4){0, 4, 1, 5});
  f32x4 hi = __builtin_shuffle(r0, r1, (i32x4){2, 6, 3, 7});
  memcpy(dst, &lo, 2 * sizeof(float));
  memcpy(dst + ld, (const float*)&lo + 2, 2 * sizeof(float));
  memcpy(dst + 2 * ld, &hi, 2 * sizeof(float));
  memcpy(dst + 3 * ld, (const float*)&hi + 2, 2 * sizeof(float));
}

static inline void pair_rows_f64(const double* const* r, int64_t q, double* dst, int64_t ld) {
  transpose_rows_f64(r, q, dst, ld);
}

DEFINE_PACKERS(f32, float)
DEFINE_PACKERS(f64, double)

/* ---- the blocked product ---------------------------------------------------------------- */

/* One xpu_gemm call as its tasks see it. */
typedef struct GemmWork {
  const XpuGemm* g;
  const GemmKernel* kern;
  size_t size;
  int64_t m_tiles, n_tiles;
  int64_t m_panels; /* micro-panels of rows, shared out among the row tiles (tile_row) */
  int64_t mc, nc;   /* the tallest row tile, the width of a column tile (multiples of mr, nr) */
  int64_t group_tiles, m_groups; /* a task covers group_tiles row tiles of one column tile */
  int64_t kc;                    /* the depth of a K block (the last one may be shallower) */
  atomic_bool out_of_memory;
} GemmWork;

/* About how many tasks a product is split into, when it is large enough: enough to balance
 * a few threads, few enough that each task re-packs the B block it shares with the other
 * row groups rarely (a packed B block is reused by every row tile of its task). */
#define XPU_GEMM_TASKS 16

/* Packs the A block of tile rows [i0, i0 + mc) x K columns [k0, k0 + kc) of batch b. */
static void pack_a_block(const GemmWork* w, int64_t b, int64_t i0, int64_t mc, int64_t k0,
                         int64_t kc, void* dst) {
  const XpuGemm* g = w->g;
  int64_t off = g->batch_a != NULL ? g->batch_a[b] : 0;
  int mr = w->kern->mr;
  if (g->dtype == TF_FLOAT) {
    const float* a = (const float*)g->a + off;
    if (g->conv != NULL) pack_conv_f32(a, g->conv, i0, mc, k0, kc, mr, dst);
    else pack_a_f32(a, g->a_rs, g->a_cs, i0, mc, k0, kc, mr, dst);
  } else {
    const double* a = (const double*)g->a + off;
    if (g->conv != NULL) pack_conv_f64(a, g->conv, i0, mc, k0, kc, mr, dst);
    else pack_a_f64(a, g->a_rs, g->a_cs, i0, mc, k0, kc, mr, dst);
  }
}

/* Packs the B block of K rows [k0, k0 + kc) x tile columns [j0, j0 + nc) of batch b. */
static void pack_b_block(const GemmWork* w, int64_t b, int64_t k0, int64_t kc, int64_t j0,
                         int64_t nc, void* dst) {
  const XpuGemm* g = w->g;
  int64_t off = g->batch_b != NULL ? g->batch_b[b] : 0;
  if (g->dtype == TF_FLOAT) {
    pack_b_f32((const float*)g->b + off, g->b_rs, g->b_cs, k0, kc, j0, nc, w->kern->nr, dst);
  } else {
    pack_b_f64((const double*)g->b + off, g->b_rs, g->b_cs, k0, kc, j0, nc, w->kern->nr, dst);
  }
}

/* Writes (or adds, with accumulate) the top-left h x wd corner of an mr x nr tile. */
static void store_partial(const GemmWork* w, const void* tile, void* c, int64_t ldc, int64_t h,
                          int64_t wd, int accumulate) {
  int nr = w->kern->nr;
  if (w->g->dtype == TF_FLOAT) {
    const float* t = tile;
    float* d = c;
    for (int64_t i = 0; i < h; i++) {
      for (int64_t j = 0; j < wd; j++) {
        d[i * ldc + j] = accumulate ? d[i * ldc + j] + t[i * nr + j] : t[i * nr + j];
      }
    }
  } else {
    const double* t = tile;
    double* d = c;
    for (int64_t i = 0; i < h; i++) {
      for (int64_t j = 0; j < wd; j++) {
        d[i * ldc + j] = accumulate ? d[i * ldc + j] + t[i * nr + j] : t[i * nr + j];
      }
    }
  }
}

/* The first row of row tile t (t == m_tiles: m). Tiles split the micro-panels as evenly as
 * whole panels allow, the first tile one of the largest: tasks are claimed in order, so a
 * thread that starts late gets no more than the others. */
static int64_t tile_row(const GemmWork* w, int64_t t) {
  int64_t row = (t * w->m_panels + w->m_tiles - 1) / w->m_tiles * w->kern->mr;
  return row < w->g->m ? row : w->g->m;
}

/* One task: the C tiles of one row group and one tile column of a batch, over all of K. For
 * each K block the task packs the B block once and runs every row tile of its group
 * against it, so B is read from memory m_groups times in all, not m_tiles times (at 2048^2
 * the matrices no longer fit in the last-level cache, and those re-reads were the
 * difference with OpenBLAS). Each element of C still gets its K blocks in the same order,
 * whatever the grouping and the number of threads. */
static void gemm_task(void* ctx, int64_t t) {
  GemmWork* w = ctx;
  const XpuGemm* g = w->g;
  const GemmKernel* kern = w->kern;
  int64_t per_batch = w->m_groups * w->n_tiles;
  int64_t b = t / per_batch, task = t % per_batch;
  int64_t t0 = (task / w->n_tiles) * w->group_tiles, j0 = (task % w->n_tiles) * w->nc;
  int64_t t1 = t0 + w->group_tiles < w->m_tiles ? t0 + w->group_tiles : w->m_tiles;
  int64_t r0 = tile_row(w, t0), r1 = tile_row(w, t1);
  int64_t nc = g->n - j0 < w->nc ? g->n - j0 : w->nc;
  int64_t kc_max = g->k < w->kc ? g->k : w->kc;
  int64_t mc_max = r1 - r0 < w->mc ? r1 - r0 : w->mc;
  int64_t mc_pad = (mc_max + kern->mr - 1) / kern->mr * kern->mr;
  int64_t nc_pad = (nc + kern->nr - 1) / kern->nr * kern->nr;
  size_t sz = w->size;
  /* 64-byte aligned packing buffers plus one tile for the edges of C. */
  size_t a_bytes = ((size_t)(mc_pad * kc_max) * sz + 63) & ~(size_t)63;
  size_t b_bytes = ((size_t)(nc_pad * kc_max) * sz + 63) & ~(size_t)63;
  size_t t_bytes = ((size_t)(kern->mr * kern->nr) * sz + 63) & ~(size_t)63;
  char* buf = aligned_alloc(64, a_bytes + b_bytes + t_bytes);
  if (buf == NULL) {
    atomic_store(&w->out_of_memory, true);
    return;
  }
  char* ap = buf;
  char* bp = buf + a_bytes;
  char* tmp = bp + b_bytes;
  int64_t ldc = g->n;
  for (int64_t k0 = 0; k0 < g->k; k0 += w->kc) {
    int64_t kc = g->k - k0 < w->kc ? g->k - k0 : w->kc;
    int accumulate = k0 > 0;
    pack_b_block(w, b, k0, kc, j0, nc, bp);
    for (int64_t tile = t0; tile < t1; tile++) {
      int64_t i0 = tile_row(w, tile), mc = tile_row(w, tile + 1) - i0;
      char* c = (char*)g->c + ((b * g->m + i0) * g->n + j0) * (int64_t)sz;
      pack_a_block(w, b, i0, mc, k0, kc, ap);
      for (int64_t ir = 0; ir < mc; ir += kern->mr) {
        int64_t h = mc - ir < kern->mr ? mc - ir : kern->mr;
        const char* apanel = ap + (ir * kc) * (int64_t)sz;
        for (int64_t jr = 0; jr < nc; jr += kern->nr) {
          int64_t wd = nc - jr < kern->nr ? nc - jr : kern->nr;
          const char* bpanel = bp + (jr * kc) * (int64_t)sz;
          char* cij = c + (ir * ldc + jr) * (int64_t)sz;
          if (h == kern->mr && wd == kern->nr) {
            kern->ukr(kc, apanel, bpanel, cij, ldc, accumulate);
          } else {
            kern->ukr(kc, apanel, bpanel, tmp, kern->nr, 0);
            store_partial(w, tmp, cij, ldc, h, wd, accumulate);
          }
        }
      }
    }
  }
  free(buf);
}

/* The micro-kernel and blocking for g's element type. */
static const GemmKernel* gemm_kernel(const XpuGemm* g) {
  const GemmArch* arch = gemm_arch();
  return g->dtype == TF_FLOAT ? &arch->f32 : &arch->f64;
}

/* A product of one tile of C is still split into row tiles from this many multiply-adds
 * on (and two micro-panels of rows): against np.matmul with OpenBLAS's two threads, on 2
 * cores, a 96^2 product (0.9 M) went from 0.95x to 0.77x of its time split, 128^2 (2.1 M)
 * from 1.16x to 0.83-0.90x, while 64^2 (0.26 M) went from 1.10x to 1.29x. */
#define XPU_GEMM_SPLIT_FMAS (1 << 19)

/* Whether xpu_gemm(g) splits: C has more than one tile of the micro-kernel's blocking, or
 * one with enough work for two threads. */
static bool gemm_splits(const XpuGemm* g, const GemmKernel* kern) {
  if (g->batches * ((g->m + kern->mc - 1) / kern->mc) * ((g->n + kern->nc - 1) / kern->nc) > 1)
    return true;
  double fmas = (double)g->m * (double)g->n * (double)g->k;
  return fmas >= XPU_GEMM_SPLIT_FMAS && g->m >= 2 * kern->mr;
}

/* Row tiles are of equal height in whole micro-panels (tile_row), at most the micro-kernel's
 * mc. A product of several tiles, but too few for every thread to take two, is cut into
 * XPU_GEMM_TILES_PER_THREAD row tiles per thread: a 256^2 product is then 4 tiles of 60 to
 * 72 rows and 512^2 4 of 120 to 132, where tiles of 192 rows left a 64-row or 128-row
 * remainder that one thread ran while the other waited. Two tiles per thread rather than
 * one let a helper that starts late take less than half; finer tiles would each pack the
 * whole B block again. The tiles of C do not change how any element is computed (each gets
 * its K blocks in the same order), so results are the same whatever the number of threads. */
#define XPU_GEMM_TILES_PER_THREAD 2

static void choose_row_tiles(GemmWork* w, int64_t column_tasks) {
  int64_t mr = w->kern->mr;
  w->m_panels = (w->g->m + mr - 1) / mr;
  w->m_tiles = (w->g->m + w->kern->mc - 1) / w->kern->mc;
  if (gemm_splits(w->g, w->kern)) {
    int64_t want = (int64_t)xpu_pool_threads() * XPU_GEMM_TILES_PER_THREAD;
    if (w->m_tiles * column_tasks < want) {
      w->m_tiles = (want + column_tasks - 1) / column_tasks;
      if (w->m_tiles > w->m_panels) w->m_tiles = w->m_panels;
    }
  }
  w->mc = (w->m_panels + w->m_tiles - 1) / w->m_tiles * mr;
}

/* Fills C of every batch with zeros (k == 0). */
static void gemm_zero(const XpuGemm* g, size_t sz) {
  memset(g->c, 0, (size_t)(g->batches * g->m * g->n) * sz);
}

void xpu_gemm_expect(const XpuGemm* g) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batches <= 0) return;
  if (!gemm_splits(g, gemm_kernel(g))) return;
  /* About 100 GFLOP/s in float and 50 in double on one core: 50 or 25 multiply-adds per ns. */
  double fmas = (double)g->batches * (double)g->m * (double)g->n * (double)g->k;
  xpu_pool_expect_job((uint64_t)(fmas / (g->dtype == TF_FLOAT ? 50.0 : 25.0)));
}

bool xpu_gemm(const XpuGemm* g) {
  if (g->m <= 0 || g->n <= 0 || g->batches <= 0) return true;
  size_t sz = g->dtype == TF_FLOAT ? sizeof(float) : sizeof(double);
  if (g->k <= 0) {
    gemm_zero(g, sz);
    return true;
  }
  GemmWork w = {.g = g, .kern = gemm_kernel(g), .size = sz};
  w.nc = w.kern->nc;
  /* K in blocks of about equal depth (a multiple of 4, at most the kernel's kc; the last
   * takes the rest): 784 is 4 blocks of 196, not 3 of 256 and one of 16 whose pass over C
   * does little. */
  int64_t k_blocks = (g->k + w.kern->kc - 1) / w.kern->kc;
  w.kc = (g->k + k_blocks - 1) / k_blocks;
  w.kc = (w.kc + 3) / 4 * 4 < w.kern->kc ? (w.kc + 3) / 4 * 4 : w.kern->kc;
  w.n_tiles = (g->n + w.nc - 1) / w.nc;
  int64_t column_tasks = g->batches * w.n_tiles;
  choose_row_tiles(&w, column_tasks);
  /* Row groups: as many as needed for about XPU_GEMM_TASKS tasks, at most one per row tile. */
  int64_t groups = column_tasks >= XPU_GEMM_TASKS ? 1
                   : (XPU_GEMM_TASKS + column_tasks - 1) / column_tasks;
  if (groups > w.m_tiles) groups = w.m_tiles;
  w.group_tiles = (w.m_tiles + groups - 1) / groups;
  w.m_groups = (w.m_tiles + w.group_tiles - 1) / w.group_tiles;
  atomic_init(&w.out_of_memory, false);
  xpu_parallel_for(g->batches * w.m_groups * w.n_tiles, gemm_task, &w);
  return !atomic_load(&w.out_of_memory);
}
