// A copy stream beside the compute stream, so that uploading the next batch
// overlaps the step that computes on this one (the data loader, io/loader.h).
//
// cuda: a non-blocking cudaStream_t and a few events. The two streams order
// each other only through events: wait_compute() makes later copies wait for
// everything enqueued so far on the compute (current) stream, and
// compute_wait(slot) makes later compute wait for the copies marked by
// record(slot). emu and cpu run every operation in order as it is issued, so
// a copy is done when upload() returns and every mark is complete; the calls
// are the same, which is how CI runs the loader's cuda path on the emulator.
#pragma once
#include <cstddef>
#include <vector>

#include "engine/device.h"

namespace eng {

class CopyStream {
 public:
  CopyStream(Device dev, int slots);  // slots: events record() may use, 0 .. slots-1
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  Device device() const { return dev_; }

  void wait_compute();                                        // copies after this wait for compute so far
  void upload(void* d_dst, const void* h_src, size_t bytes);  // host (page-locked on cuda) -> device
  void record(int slot);                                      // mark the copies enqueued so far
  void compute_wait(int slot);                                // compute after this waits for that mark
  bool done(int slot) const;                                  // the mark has completed (never blocks)
  void synchronize(int slot) const;                           // block until it has
  void synchronize() const;                                   // every copy issued so far

 private:
  Device dev_;
  void* stream_ = nullptr;        // cuda only
  void* compute_mark_ = nullptr;  // cuda: recorded on the compute stream by wait_compute()
  std::vector<void*> events_;     // cuda: one per slot
};

}  // namespace eng
