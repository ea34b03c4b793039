// The epoch sampler: which samples each rank reads at each step.
//
// Every epoch is a permutation of the n samples, a pure function of (seed,
// epoch) (unshuffled: the identity, for evaluation). Step s of the epoch is
// the global batch perm[s*G, (s+1)*G), G = micro_batch x micro-slots; the
// slots are dealt rank-major, as the GPT-2 batches are: rank r's micro-batch
// m is slot r*accum + m, samples perm[s*G + slot*B, ... + B). So the samples
// of a global step do not depend on how many ranks share it, and a dp run
// trains on the same batches as the one-process run.
// The ragged tail (n mod G samples; different ones each epoch when shuffled)
// is dropped, so every rank takes steps_per_epoch() steps, and within an
// epoch every kept sample is read exactly once, by one rank.
// The whole state is (epoch, step), what a checkpoint saves to resume.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace eng {

enum class Shuffle : uint8_t { no, yes };

class EpochSampler {
 public:
  // n samples; micro_batch B per slot; slots = dp * accum micro-batches per step.
  EpochSampler(int64_t n, int64_t micro_batch, int64_t slots, uint64_t seed, Shuffle shuffle);
  int64_t size() const { return n_; }
  int64_t micro_batch() const { return B_; }
  int64_t slots() const { return slots_; }
  int64_t global_batch() const { return B_ * slots_; }
  int64_t steps_per_epoch() const { return n_ / global_batch(); }

  // The B sample indices of `slot` at `step` of `epoch`. Thread-safe (the
  // permutation of the latest epoch is cached under a lock).
  void indices(int64_t epoch, int64_t step, int64_t slot, int64_t* out) const;
  // The permutation of an epoch (for tests and the bench).
  std::vector<int64_t> permutation(int64_t epoch) const;

 private:
  int64_t n_, B_, slots_;
  uint64_t seed_;
  Shuffle shuffle_;
  mutable std::mutex mu_;
  mutable std::vector<int64_t> perm_;
  mutable int64_t perm_epoch_ = -1;
};

// A position in the stream of micro-batches one rank reads: epoch, step of
// the epoch, micro-batch of the step. advance() moves on one micro-batch,
// rolling over to the next step and the next epoch.
struct SamplePosition {
  int64_t epoch = 0, step = 0, micro = 0;
  void advance(int64_t accum, int64_t steps_per_epoch);
  bool operator==(const SamplePosition&) const = default;
};

}  // namespace eng
