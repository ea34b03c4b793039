// Image samples: shape checks, labels read once, scaling and layout.
#include "io/image_dataset.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/error.h"

namespace eng {

ImageDataset::ImageDataset(const std::string& path, h5::ReadPath read_path) : path_(path), read_path_(read_path) {
  file_ = std::make_unique<h5::File>(path);
  images_ = std::make_unique<h5::Dataset>(*file_, "images");
  const h5::Dataset& im = *images_;
  ENGINE_USER_CHECK(im.rank() == 3 || im.rank() == 4, im.where(), ": expected (N, H, W) or (N, H, W, C), got rank ",
                    im.rank());
  N_ = im.shape()[0], H_ = im.shape()[1], W_ = im.shape()[2];
  channel_last_ = im.rank() == 4;
  C_ = channel_last_ ? im.shape()[3] : 1;
  ENGINE_USER_CHECK(N_ > 0 && H_ > 0 && W_ > 0 && C_ > 0, im.where(), ": empty images");
  range_ = im.type() == h5::ElemType::u8 ? 255.0f : 1.0f;
  mean_ = float(im.attribute("mean").value_or(0.0));
  std_ = float(im.attribute("std").value_or(1.0));
  ENGINE_USER_CHECK(std_ > 0 && std::isfinite(std_) && std::isfinite(mean_), im.where(), ": attributes mean ", mean_,
                    " and std ", std_, " (std must be positive)");

  const h5::Dataset lab(*file_, "labels");
  ENGINE_USER_CHECK(lab.rank() == 1 && lab.shape()[0] == N_, lab.where(), ": expected (", N_,
                    ") labels, one per image, got ",
                    lab.rank() == 1 ? cat("(", lab.shape()[0], ")") : cat("rank ", lab.rank()));
  std::vector<int64_t> raw(static_cast<size_t>(N_));
  const int64_t zero = 0;
  lab.read_i64({&zero, 1}, lab.shape(), raw.data());
  const auto hi_at = std::max_element(raw.begin(), raw.end());
  const int64_t hi = *hi_at;
  const std::optional<double> attr = lab.attribute("classes");
  if (!attr && hi >= 0) {
    // Without a `classes` attribute the head gets max + 1 outputs. One stray
    // label (1e6 among 0..9) would silently build a head of a million
    // classes, or fail to allocate one: refused when that is over 1024
    // classes of which more than three quarters never occur. (A small split
    // of a many-class set, 20 samples of 100 classes, still loads.)
    std::vector<int64_t> sorted(raw);
    std::sort(sorted.begin(), sorted.end());
    const int64_t distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
    ENGINE_USER_CHECK(hi + 1 <= 1024 || hi + 1 <= 4 * distinct, lab.where(), ": label ", hi, " of sample ",
                      hi_at - raw.begin(), " implies ", hi + 1, " classes, but only ", distinct,
                      " distinct labels occur; fix that label, or give the dataset a 'classes' attribute if so many "
                      "classes are meant");
  }
  classes_ = int64_t(attr.value_or(double(hi + 1)));
  for (int64_t i = 0; i < N_; ++i)
    ENGINE_USER_CHECK(raw[size_t(i)] >= 0 && raw[size_t(i)] < classes_, lab.where(), ": label ", raw[size_t(i)],
                      " of sample ", i, " is outside [0, ", classes_, ")");
  labels_.assign(raw.begin(), raw.end());
}

ImageDataset::~ImageDataset() = default;

int64_t ImageDataset::bytes_per_sample() const { return C_ * H_ * W_ * int64_t(h5::elem_size(images_->type())) + 4; }

std::string ImageDataset::describe() const {
  return cat(path_, ": ", N_, " images of ", C_, " x ", H_, " x ", W_, " ", h5::elem_name(images_->type()), ", ",
             classes_, " classes, ", images_->layout());
}

void ImageDataset::read(int64_t index, float* x, void* y) const {
  ENGINE_CHECK(index >= 0 && index < N_, path_, ": image ", index, " outside [0, ", N_, ")");
  const int64_t plane = H_ * W_;
  if (!channel_last_) {
    const int64_t start[3] = {index, 0, 0}, count[3] = {1, H_, W_};
    images_->read(start, count, x, read_path_);
  } else {
    // (H, W, C) in the file -> (C, H, W): read into scratch, transpose.
    thread_local std::vector<float> hwc;
    hwc.resize(size_t(plane * C_));
    const int64_t start[4] = {index, 0, 0, 0}, count[4] = {1, H_, W_, C_};
    images_->read(start, count, hwc.data(), read_path_);
    for (int64_t p = 0; p < plane; ++p)
      for (int64_t c = 0; c < C_; ++c) x[c * plane + p] = hwc[size_t(p * C_ + c)];
  }
  for (int64_t i = 0; i < C_ * plane; ++i) x[i] = (x[i] / range_ - mean_) / std_;
  *static_cast<int32_t*>(y) = labels_[size_t(index)];
}

}  // namespace eng
