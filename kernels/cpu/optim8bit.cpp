// 8-bit AdamW (Dettmers et al. 2022, "8-bit Optimizers via Block-wise
// Quantization"), the plain CPU reference of kernels/cuda/adamw8bit.cu.
//
// Each moment is stored as one byte per element, an index into a 256-entry
// table of values in [-1, 1] (the "dynamic" map), plus one fp32 absmax per
// block of kQuantBlock = 256 elements: value = map[code] * absmax[block].
// One step per block: dequantize m and v, the AdamW update in fp32 (the
// parameter uses the new fp32 moments, before they are rounded), the new
// absmax of each moment over the block, then requantize m / absmax and
// v / absmax to the nearest table entry.
// bytes per element: read p, g (8) + read and write both codes (4) + 16/256
// for the absmaxes + write p (4) = 16.06 B; flops ~ 25 per element (the
// AdamW update, two absmax comparisons, two divisions and two 8-step
// binary searches counted as one each).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

// The dynamic map of bitsandbytes' create_dynamic_map(signed, 7 exponent
// bits, 8 bits): for i = 0..6, the midpoints of linspace(0.1, 1, k_i) for
// k_i = 2^i + 1 (signed) or 2^(i+1) + 1 (unsigned) points, times 10^(i-6),
// and their negatives when signed; then 0 and 1. Signed: 2 x 127 + 2 = 256
// entries in [-0.993, 1]; unsigned: 254 + 2 = 256 in [0, 1]. Each is computed
// in double and rounded to float once, then the table is sorted.
std::array<float, 256> dynamic_map(bool is_signed) {
  std::vector<double> data;
  for (int i = 0; i < 7; ++i) {
    const int k = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    const double scale = std::pow(10.0, double(i - 6));
    for (int j = 0; j + 1 < k; ++j) {
      const double lo = 0.1 + 0.9 * double(j) / double(k - 1), hi = 0.1 + 0.9 * double(j + 1) / double(k - 1);
      const double mean = (lo + hi) / 2.0;
      data.push_back(scale * mean);
      if (is_signed) data.push_back(-scale * mean);
    }
  }
  data.push_back(0.0);
  data.push_back(1.0);
  std::array<float, 256> map{};
  for (size_t i = 0; i < map.size(); ++i) map[i] = float(data.at(i));
  std::sort(map.begin(), map.end());
  return map;
}

// The nearest entry of a sorted map (a tie goes to the lower one): a binary
// search for the first entry >= x, then the closer of it and the one below.
uint8_t quantize_nearest(const float* map, float x) {
  int lo = 0;  // after the 8 halvings: the number of entries < x (conditional moves, no branches)
  for (int step = 128; step > 0; step /= 2) lo += map[lo + step - 1] < x ? step : 0;
  if (lo == 0) return 0;
  if (lo == 256) return 255;
  return uint8_t(x - map[lo - 1] <= map[lo] - x ? lo - 1 : lo);
}

void adamw8bit_step(float* p, const float* grad, uint8_t* m8, float* m_absmax, uint8_t* v8, float* v_absmax, int64_t n,
                    const float* smap, const float* umap, const Adam8bitScalars& s) {
  const int64_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
#pragma omp parallel for if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
    float m[kQuantBlock], v[kQuantBlock];
    float am = 0.f, av = 0.f;
    for (int64_t i = begin; i < end; ++i) {
      const float g = s.grad_scale_on ? grad[i] * s.grad_scale : grad[i];
      float mi = smap[m8[i]] * m_absmax[b], vi = umap[v8[i]] * v_absmax[b];
      mi = s.beta1 * mi + (1.f - s.beta1) * g;
      vi = s.beta2 * vi + (1.f - s.beta2) * g * g;
      p[i] = p[i] * s.decay - s.step_size * mi / (std::sqrt(vi) / s.sqrt_bc2 + s.eps);
      m[i - begin] = mi, v[i - begin] = vi;
      am = std::max(am, std::fabs(mi));
      av = std::max(av, vi);
    }
    m_absmax[b] = am, v_absmax[b] = av;
    for (int64_t i = begin; i < end; ++i) {
      m8[i] = quantize_nearest(smap, am > 0.f ? m[i - begin] / am : 0.f);
      v8[i] = quantize_nearest(umap, av > 0.f ? v[i - begin] / av : 0.f);
    }
  }
}

}  // namespace eng::cpu
