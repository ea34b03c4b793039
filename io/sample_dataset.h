// A dataset of (input, target) samples read by index, from any thread: what
// the loader (io/loader.h) reads batches from. Implementations: the weather
// fields (io/weather_dataset.h) and labelled images (io/image_dataset.h).
// Inputs are float32; targets are float32 (fields) or int32 (class labels).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace eng {

class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual int64_t size() const = 0;
  virtual std::vector<int64_t> input_shape() const = 0;   // one sample's input, e.g. (C, H, W)
  virtual std::vector<int64_t> target_shape() const = 0;  // one sample's target; {} for a class label
  virtual DType target_dtype() const = 0;                 // f32 or i32
  // Writes sample `index`: input_shape() floats to x, target_shape() elements
  // of target_dtype() to y. Must be safe to call from several threads at once.
  virtual void read(int64_t index, float* x, void* y) const = 0;
  virtual int64_t bytes_per_sample() const = 0;  // bytes read from storage per sample (for MB/s)
  virtual std::string describe() const = 0;      // one line for the start-up summary
};

}  // namespace eng
