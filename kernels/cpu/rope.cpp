// Rotary position embedding (Su et al. 2021), in Hugging Face Llama's
// "rotate_half" layout: a head of HS values is two halves, and pair i
// (i < HS/2) is (x[i], x[i + HS/2]), turned by the angle pos * inv_freq[i]:
//   out[i]        = x[i] cos - x[i + HS/2] sin
//   out[i + HS/2] = x[i + HS/2] cos + x[i] sin
// The backward turns the gradient back (the transpose: sin -> -sin), so one
// loop does both (direction). table (positions, HS): cos of pair i at
// [p][i], sin at [p][HS/2 + i], fp32 (rope_table in engine/ops/rope.cpp
// fills it). x is (B, T, rows ld apart); a row's first `rot` heads turn, the
// next `copy` heads are copied unturned (out != x: a gradient's v part).
// bytes: 2 B T (rot + copy) HS sizeof(T) + T HS 4;  flops: 6 B T rot HS/2.
#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void rope_apply(const T* x, T* out, const float* table, const RopeDims& d, int direction) {
  const int64_t half = d.HS / 2;
#pragma omp parallel for collapse(2) if (d.B * d.T * d.rot * d.HS > 16384)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < d.T; ++t) {
      const float* cs = table + (d.pos_offset + t) * d.HS;
      const int64_t row = (b * d.T + t) * d.ld;
      for (int64_t h = 0; h < d.rot; ++h) {
        const T* xh = x + row + h * d.HS;
        T* oh = out + row + h * d.HS;
        for (int64_t i = 0; i < half; ++i) {
          const T c = T(cs[i]), s = direction > 0 ? T(cs[half + i]) : -T(cs[half + i]);
          const T x1 = xh[i], x2 = xh[half + i];
          oh[i] = x1 * c - x2 * s;
          oh[half + i] = x2 * c + x1 * s;
        }
      }
      for (int64_t j = d.rot * d.HS; j < (d.rot + d.copy) * d.HS; ++j) out[row + j] = x[row + j];
    }
}

template void rope_apply<float>(const float*, float*, const float*, const RopeDims&, int);
template void rope_apply<double>(const double*, double*, const float*, const RopeDims&, int);

}  // namespace eng::cpu
