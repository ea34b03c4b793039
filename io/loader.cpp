// The loader's ring, reader threads and device double buffer.
#include "io/loader.h"

#include "base/error.h"
#include "engine/graph.h"

namespace eng {

namespace {
std::vector<int64_t> with_batch(int64_t B, std::vector<int64_t> shape) {
  shape.insert(shape.begin(), B);
  return shape;
}
bool on_gpu(Device d) { return d.type == DeviceType::cuda || d.type == DeviceType::emu; }
}  // namespace

Loader::Loader(const SampleDataset& data, const EpochSampler& sampler, int64_t first_slot, int64_t accum, Device dev,
               LoaderOptions opt, SamplePosition start)
    : data_(data),
      sampler_(sampler),
      first_slot_(first_slot),
      accum_(accum),
      dev_(dev),
      opt_(opt),
      B_(sampler.micro_batch()),
      x_elems_(shape_numel(data.input_shape())),
      y_elems_(shape_numel(data.target_shape())),
      claim_pos_(start),
      next_pos_(start),
      stats_since_(std::chrono::steady_clock::now()) {
  ENGINE_CHECK(opt.workers >= 0, "loader: --data_workers must be 0 or more, got ", opt.workers);
  ENGINE_CHECK(opt.depth >= 2, "loader: the ring needs at least 2 buffers, got ", opt.depth);
  ENGINE_CHECK(accum >= 1 && first_slot >= 0 && first_slot + accum <= sampler.slots(), "loader: slots ", first_slot,
               "..", first_slot + accum - 1, " outside the sampler's ", sampler.slots());
  ENGINE_CHECK(data.target_dtype() == DType::f32 || data.target_dtype() == DType::i32,
               "loader: targets must be f32 or i32");
  ENGINE_CHECK(start.step < sampler.steps_per_epoch() && start.micro < accum, "loader: start position (epoch ",
               start.epoch, ", step ", start.step, ", micro ", start.micro, ") outside an epoch of ",
               sampler.steps_per_epoch(), " steps");
  const auto xs = with_batch(B_, data.input_shape()), ys = with_batch(B_, data.target_shape());
  const size_t x_bytes = size_t(B_ * x_elems_) * 4, y_bytes = size_t(B_ * y_elems_) * 4;
  slots_.resize(size_t(opt.depth));
  for (Slot& s : slots_) {
    s.indices.resize(size_t(B_));
    if (on_gpu(dev)) {
      s.x_host = host_staging(dev, x_bytes);
      s.y_host = host_staging(dev, y_bytes);
      s.x = static_cast<float*>(s.x_host.get());
      s.y = static_cast<char*>(s.y_host.get());
    } else {
      s.x_cpu = Tensor::empty(xs, DType::f32, dev);
      s.y_cpu = Tensor::empty(ys, data.target_dtype(), dev);
      s.x = s.x_cpu.data<float>();
      s.y = static_cast<char*>(s.y_cpu.data_ptr());
    }
  }
  if (on_gpu(dev)) {
    copies_ = std::make_unique<CopyStream>(dev, 2);
    for (int b = 0; b < 2; ++b) {
      x_dev_[b] = Tensor::empty(xs, DType::f32, dev);
      y_dev_[b] = Tensor::empty(ys, data.target_dtype(), dev);
    }
  }
  for (int i = 0; i < opt.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  if (copies_) {
    try {
      copies_->synchronize();
    } catch (...) {  // a destructor must not throw; the device error was or will be reported elsewhere
    }
  }
}

bool Loader::claim(Slot*& slot, int64_t& j) {
  // The oldest batch with samples not yet handed out...
  for (int64_t k = released_; k < claimed_; ++k) {
    Slot& s = slots_[size_t(k % opt_.depth)];
    if (s.seq == k && s.handed < B_) {
      slot = &s;
      j = s.handed++;
      return true;
    }
  }
  // ...else a new batch, if its slot is free.
  if (claimed_ >= released_ + opt_.depth) return false;
  Slot& s = slots_[size_t(claimed_ % opt_.depth)];
  s.seq = claimed_;
  s.handed = 1;
  s.remaining = B_;
  s.error = nullptr;
  sampler_.indices(claim_pos_.epoch, claim_pos_.step, first_slot_ + claim_pos_.micro, s.indices.data());
  claim_pos_.advance(accum_, sampler_.steps_per_epoch());
  ++claimed_;
  slot = &s;
  j = 0;
  return true;
}

// Reads sample j of slot s without the lock (held on entry and on return);
// an error is kept with the slot's batch for next() to rethrow.
void Loader::read_sample(Slot& s, int64_t j, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::exception_ptr err;
  try {
    data_.read(s.indices[size_t(j)], s.x + j * x_elems_, s.y + j * y_elems_ * 4);
    bytes_ += data_.bytes_per_sample();
  } catch (...) {
    err = std::current_exception();
  }
  lock.lock();
  if (err && !s.error) s.error = err;
  if (--s.remaining == 0) ready_cv_.notify_all();
}

void Loader::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Slot* s = nullptr;
    int64_t j = 0;
    work_cv_.wait(lock, [&] { return stop_ || claim(s, j); });
    if (stop_) return;
    read_sample(*s, j, lock);
  }
}

// Blocks until batch `seq` is read (reading it here when there are no
// workers), then rethrows its reader's error if it has one.
void Loader::wait_ready(int64_t seq) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Slot& s = slots_[size_t(seq % opt_.depth)];
    if (s.seq == seq && s.handed == B_ && s.remaining == 0) break;
    if (seq >= released_ + opt_.depth) {  // its slot still holds a batch being copied
      lock.unlock();
      release_copied(true);
      lock.lock();
      continue;
    }
    Slot* c = nullptr;
    int64_t j = 0;
    if (opt_.workers == 0 && claim(c, j)) {
      read_sample(*c, j, lock);
      continue;
    }
    ready_cv_.wait(lock);
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::exception_ptr err = slots_[size_t(seq % opt_.depth)].error;
  if (err) {
    try {
      std::rethrow_exception(err);
    } catch (const UserError& e) {  // the data's fault (a file changed, a NaN): said as it is
      throw UserError(cat("data loader: ", e.what()));
    } catch (const std::exception& e) {
      ENGINE_FAIL("data loader: ", e.what());
    }
  }
}

// Frees the host slots of batches whose device copy has finished, oldest
// first; with block, waits for the oldest pending copy.
void Loader::release_copied(bool block) {
  while (released_ < uploaded_) {
    const int b = int(released_ % 2);
    if (!copies_->done(b)) {
      if (!block) return;
      copies_->synchronize(b);
    }
    block = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++released_;
    }
    work_cv_.notify_all();
  }
}

void Loader::upload(int64_t seq) {
  while (released_ + 2 <= seq) release_copied(true);  // event seq % 2 is free for reuse
  const Slot& s = slots_[size_t(seq % opt_.depth)];
  const int b = int(seq % 2);
  copies_->upload(x_dev_[b].data_ptr(), s.x, size_t(B_ * x_elems_) * 4);
  copies_->upload(y_dev_[b].data_ptr(), s.y, size_t(B_ * y_elems_) * 4);
  copies_->record(b);
  uploaded_ = seq + 1;
}

Batch Loader::next() {
  const int64_t k = consumed_;
  Batch out;
  if (!on_gpu(dev_)) {
    {  // the previous batch's tensors are done with: its slot is free
      std::lock_guard<std::mutex> lock(mu_);
      released_ = k;
    }
    work_cv_.notify_all();
    wait_ready(k);
    const Slot& s = slots_[size_t(k % opt_.depth)];
    out = Batch{s.x_cpu, s.y_cpu, next_pos_};
  } else {
    release_copied(false);
    copies_->wait_compute();  // buffer (k+1) % 2 is rewritten only after the steps enqueued so far
    if (uploaded_ == k) {
      wait_ready(k);
      upload(k);
    }
    copies_->compute_wait(int(k % 2));
    bool next_ready = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Slot& n = slots_[size_t((k + 1) % opt_.depth)];
      next_ready = n.seq == k + 1 && n.handed == B_ && n.remaining == 0 && !n.error;
    }
    if (next_ready) upload(k + 1);  // overlaps step k
    out = Batch{x_dev_[k % 2], y_dev_[k % 2], next_pos_};
  }
  ++consumed_;
  ++batches_;
  next_pos_.advance(accum_, sampler_.steps_per_epoch());
  return out;
}

LoaderStats Loader::take_stats() {
  const auto now = std::chrono::steady_clock::now();
  LoaderStats st;
  st.wait_s = wait_s_;
  st.interval_s = std::chrono::duration<double>(now - stats_since_).count();
  st.bytes = bytes_.exchange(0);
  st.batches = batches_;
  wait_s_ = 0;
  batches_ = 0;
  stats_since_ = now;
  return st;
}

}  // namespace eng
