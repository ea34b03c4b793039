// Labelled images in one HDF5 file: `images` of shape (N, H, W) or
// (N, H, W, C) (uint8 or any type io/hdf5 reads) and `labels` (N) integers.
// A sample's input is (C, H, W) float32: channel-last files are transposed,
// uint8 values scaled by 1/255, then (v - mean) / std with the `mean` and
// `std` attributes of `images` when present (prepare_fashion_mnist writes
// them), else 0 and 1. The target is the label as int32.
// The labels are read and checked once, at open: every one in [0, classes),
// classes from the `classes` attribute of `labels`, else max label + 1.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/hdf5.h"
#include "io/sample_dataset.h"

namespace eng {

class ImageDataset : public SampleDataset {
 public:
  explicit ImageDataset(const std::string& path, h5::ReadPath read_path = h5::ReadPath::automatic);
  ~ImageDataset() override;
  int64_t size() const override { return N_; }
  std::vector<int64_t> input_shape() const override { return {C_, H_, W_}; }
  std::vector<int64_t> target_shape() const override { return {}; }
  DType target_dtype() const override { return DType::i32; }
  void read(int64_t index, float* x, void* y) const override;
  int64_t bytes_per_sample() const override;
  std::string describe() const override;
  int64_t classes() const { return classes_; }
  int32_t label(int64_t index) const { return labels_[size_t(index)]; }

 private:
  std::string path_;
  h5::ReadPath read_path_;
  std::unique_ptr<h5::File> file_;
  std::unique_ptr<h5::Dataset> images_;
  bool channel_last_ = false;
  int64_t N_ = 0, C_ = 1, H_ = 0, W_ = 0, classes_ = 0;
  float range_ = 1, mean_ = 0, std_ = 1;  // x = (v / range - mean) / std; range 255 for uint8
  std::vector<int32_t> labels_;
};

}  // namespace eng
