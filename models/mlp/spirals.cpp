// Spiral generation from the counter-based RNG, so every run and every
// platform sees the same points for the same seed.
#include "models/mlp/spirals.h"

#include <cmath>
#include <vector>

#include "kernels/rng.h"

namespace eng::models {

Spirals make_spirals(int64_t points_per_class, int classes, float noise, uint64_t seed) {
  const int64_t n = points_per_class * classes;
  std::vector<float> x(size_t(n * 2));
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int c = 0; c < classes; ++c)
    for (int64_t i = 0; i < points_per_class; ++i) {
      const int64_t k = c * points_per_class + i;
      const float r = float(i) / float(std::max<int64_t>(points_per_class - 1, 1));
      const float t = 4.0f * float(c) + 4.0f * r + noise * rng::normal(seed, uint64_t(k));
      x[size_t(2 * k)] = r * std::sin(t);
      x[size_t(2 * k + 1)] = r * std::cos(t);
      y[size_t(k)] = c;
    }
  return {Tensor::from_vector(x, {n, 2}), Tensor::from_ints(y, {n})};
}

}  // namespace eng::models
