// Epoch permutations by Fisher-Yates over counter-based random numbers.
#include "io/sampler.h"

#include <numeric>

#include "base/error.h"
#include "kernels/rng.h"

namespace eng {

EpochSampler::EpochSampler(int64_t n, int64_t micro_batch, int64_t slots, uint64_t seed, Shuffle shuffle)
    : n_(n), B_(micro_batch), slots_(slots), seed_(seed), shuffle_(shuffle) {
  ENGINE_CHECK(micro_batch > 0 && slots > 0, "sampler: micro-batch ", micro_batch, " and slots ", slots,
               " must be positive");
  ENGINE_CHECK(n >= global_batch(), "sampler: ", n, " samples are fewer than one global batch of ", global_batch(),
               " (", micro_batch, " x ", slots, " micro-batches)");
}

std::vector<int64_t> EpochSampler::permutation(int64_t epoch) const {
  std::vector<int64_t> p(static_cast<size_t>(n_));
  std::iota(p.begin(), p.end(), int64_t(0));
  if (shuffle_ == Shuffle::no) return p;
  // One random stream per epoch; swap i with a uniform j <= i (the modulo
  // bias is below n / 2^64).
  const uint64_t stream = rng::bits(seed_, uint64_t(epoch));
  for (int64_t i = n_ - 1; i > 0; --i) {
    const int64_t j = int64_t(rng::bits(stream, uint64_t(i)) % uint64_t(i + 1));
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

void EpochSampler::indices(int64_t epoch, int64_t step, int64_t slot, int64_t* out) const {
  ENGINE_CHECK(step >= 0 && step < steps_per_epoch() && slot >= 0 && slot < slots_, "sampler: step ", step, " slot ",
               slot, " outside an epoch of ", steps_per_epoch(), " steps x ", slots_, " slots");
  std::lock_guard<std::mutex> lock(mu_);
  if (perm_epoch_ != epoch) {
    perm_ = permutation(epoch);
    perm_epoch_ = epoch;
  }
  const int64_t first = step * global_batch() + slot * B_;
  for (int64_t b = 0; b < B_; ++b) out[b] = perm_[size_t(first + b)];
}

void SamplePosition::advance(int64_t accum, int64_t steps_per_epoch) {
  if (++micro < accum) return;
  micro = 0;
  if (++step < steps_per_epoch) return;
  step = 0;
  ++epoch;
}

}  // namespace eng
