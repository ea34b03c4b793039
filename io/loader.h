// The batch loader: reader threads fill a ring of host buffers; batches reach
// the device through a double buffer on a copy stream.
//
//   workers ──read samples──> host ring (depth slots, page-locked on cuda)
//   next(k): [host slot k ready?] ──copy stream──> device buffer k % 2
//            compute stream waits on the copy's event, then step k runs;
//            batch k+1 is copied while step k computes.
//
// One rank's micro-batches come in order: epoch, step of the epoch, micro-
// batch of the step (io/sampler.h says which samples each is). Workers take
// samples one at a time in that order, so N workers share each batch and run
// ahead into the next depth-1 slots while the training thread computes.
// A slot is free again once its batch has been copied to the device (cuda,
// emu) or, on cpu, where the batch tensors are the slot itself, at the next
// call to next(). So: a batch's tensors are valid until the next call to
// next(); nothing is allocated or copied on the host per batch.
//
// workers = 0 reads each batch on the calling thread inside next() (the
// baseline the bench compares with). A reader's error is stored with its
// batch and rethrown by next() on the training thread, with the dataset's
// message; the destructor stops and joins the workers (a worker finishes the
// sample it is reading, never more), so shutdown never hangs.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/copy_stream.h"
#include "engine/tensor.h"
#include "io/sample_dataset.h"
#include "io/sampler.h"

namespace eng {

struct LoaderOptions {
  int workers = 2;  // reader threads; 0: read on the calling thread
  int depth = 3;    // host buffers in the ring, at least 2
};

struct Batch {
  Tensor x, y;         // (B, input...) f32 and (B, target...) on the loader's device
  SamplePosition pos;  // which micro-batch of which step and epoch
};

// Counted since the previous take_stats().
struct LoaderStats {
  double wait_s = 0;      // time next() blocked for data
  double interval_s = 0;  // wall time since the previous take_stats()
  int64_t bytes = 0;      // bytes the readers read from storage
  int64_t batches = 0;    // batches next() returned
  double read_mb_per_s() const { return interval_s > 0 ? double(bytes) / 1e6 / interval_s : 0; }
};

class Loader {
 public:
  // This rank reads micro-batch slots first_slot .. first_slot + accum - 1 of
  // every step (first_slot = dp_rank * accum), starting at `start`.
  Loader(const SampleDataset& data, const EpochSampler& sampler, int64_t first_slot, int64_t accum, Device dev,
         LoaderOptions opt, SamplePosition start = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Batch next();
  SamplePosition position() const { return next_pos_; }  // of the batch next() returns next (checkpoints)
  LoaderStats take_stats();
  const LoaderOptions& options() const { return opt_; }

 private:
  struct Slot {
    int64_t seq = -1;  // the batch it holds or is filling
    std::vector<int64_t> indices;
    int64_t handed = 0;     // samples given to readers
    int64_t remaining = 0;  // samples not yet read
    std::exception_ptr error;
    Tensor x_cpu, y_cpu;                   // cpu: the batch tensors themselves
    std::shared_ptr<void> x_host, y_host;  // cuda, emu: page-locked staging
    float* x = nullptr;
    char* y = nullptr;
  };

  void worker_loop();
  // Under mu_: the next sample to read, claiming a slot for a new batch if
  // needed; false when none can be handed out yet.
  bool claim(Slot*& slot, int64_t& j);
  void read_sample(Slot& s, int64_t j, std::unique_lock<std::mutex>& lock);
  void wait_ready(int64_t seq);
  void release_copied(bool block_for_oldest);
  void upload(int64_t seq);

  const SampleDataset& data_;
  const EpochSampler& sampler_;
  int64_t first_slot_, accum_;
  Device dev_;
  LoaderOptions opt_;
  int64_t B_, x_elems_, y_elems_;

  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  bool stop_ = false;
  int64_t claimed_ = 0;   // batches given a slot (sequence numbers 0, 1, ...)
  int64_t released_ = 0;  // batches whose slots are free again
  int64_t consumed_ = 0;  // batches next() has returned
  SamplePosition claim_pos_, next_pos_;
  std::vector<std::thread> workers_;

  // cuda / emu: device double buffer and the copy stream.
  std::unique_ptr<CopyStream> copies_;
  Tensor x_dev_[2], y_dev_[2];
  int64_t uploaded_ = 0;  // batches whose copy has been issued

  std::atomic<int64_t> bytes_{0};
  double wait_s_ = 0;
  int64_t batches_ = 0;
  std::chrono::steady_clock::time_point stats_since_;
};

}  // namespace eng
