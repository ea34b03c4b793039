// Weather samples: files, stats, crops, channel subsets, normalisation.
#include "io/weather_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "io/npy.h"

namespace eng {

namespace {

std::vector<float> read_stat(const h5::File& f, const std::string& name, int64_t C) {
  const h5::Dataset d(f, name);
  ENGINE_USER_CHECK(d.elements() == C, d.where(), ": ", d.elements(), " values, but the fields have ", C,
                    " channels (a stats file for other data?)");
  std::vector<int64_t> start(size_t(d.rank()), 0);
  std::vector<float> v(static_cast<size_t>(C));
  d.read(start, d.shape(), v.data());
  return v;
}

// (v - mean) / std over n values: the one normalisation of fields and climatology.
void normalize(float* v, int64_t n, float mean, float sd) {
  for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) / sd;
}

// The stats file's `climatology` (C, H, W), cropped to h x w, for `out` only,
// normalised per channel as read_channels() normalises the fields.
std::vector<float> read_climatology(const h5::File& f, int64_t C, int64_t h, int64_t w, const std::vector<int>& out,
                                    const std::vector<float>& mean, const std::vector<float>& sd) {
  const h5::Dataset d(f, "climatology");
  const auto& s = d.shape();
  ENGINE_USER_CHECK(d.rank() == 3 && s[0] == C && s[1] >= h && s[2] >= w, d.where(), ": expected shape (", C,
                    ", at least ", h, ", at least ", w, ") (channels, height, width), got ",
                    d.rank() == 3 ? cat("(", s[0], ", ", s[1], ", ", s[2], ")") : cat("rank ", d.rank()));
  std::vector<float> v(out.size() * size_t(h * w));
  for (size_t k = 0; k < out.size(); ++k) {
    const int c = out[k];
    const int64_t start[3] = {c, 0, 0}, count[3] = {1, h, w};
    float* dst = v.data() + k * size_t(h * w);
    d.read(start, count, dst);
    normalize(dst, h * w, mean[size_t(c)], sd[size_t(c)]);
  }
  return v;
}

// Consecutive runs of channel numbers: {0,1,2,5} -> {(0,3), (5,1)}.
std::vector<std::pair<int, int>> runs_of(const std::vector<int>& ch) {
  std::vector<std::pair<int, int>> r;
  for (int c : ch) {
    if (!r.empty() && r.back().first + r.back().second == c)
      ++r.back().second;
    else
      r.emplace_back(c, 1);
  }
  return r;
}

}  // namespace

std::vector<int> parse_channels(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto dash = part.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        out.push_back(std::stoi(part, &used));
        ENGINE_CHECK(used == part.size(), "");
      } else {
        const int a = std::stoi(part.substr(0, dash)), b = std::stoi(part.substr(dash + 1), &used);
        ENGINE_CHECK(used == part.size() - dash - 1 && a <= b, "");
        for (int c = a; c <= b; ++c) out.push_back(c);
      }
    } catch (const std::exception&) {
      ENGINE_USER_FAIL("channels '", s, "': expected numbers and ranges like 0,2,5 or 0-3");
    }
  }
  ENGINE_USER_CHECK(!out.empty(), "channels '", s, "': empty list");
  return out;
}

WeatherDataset::WeatherDataset(const WeatherOptions& opt) : opt_(opt) {
  namespace fs = std::filesystem;
  ENGINE_USER_CHECK(fs::is_directory(opt.dir), opt.dir, ": not a directory (expected one HDF5 file per year)");
  for (const auto& e : fs::directory_iterator(opt.dir))
    if (e.is_regular_file() && (e.path().extension() == ".h5" || e.path().extension() == ".hdf5"))
      paths_.push_back(e.path().string());
  std::sort(paths_.begin(), paths_.end());
  ENGINE_USER_CHECK(!paths_.empty(), opt.dir, ": no .h5 files");
  ENGINE_USER_CHECK(opt.dt >= 1, "weather: dt must be at least 1, got ", opt.dt);

  first_.push_back(0);
  for (const std::string& p : paths_) {
    files_.push_back(std::make_unique<h5::File>(p));
    fields_.push_back(std::make_unique<h5::Dataset>(*files_.back(), "fields"));
    const h5::Dataset& d = *fields_.back();
    ENGINE_USER_CHECK(d.rank() == 4, d.where(), ": expected shape (time, channels, height, width), got rank ",
                      d.rank());
    const auto& s = d.shape();
    if (fields_.size() == 1) {
      C_ = s[1], H_ = s[2], W_ = s[3];
    } else {
      ENGINE_USER_CHECK(s[1] == C_ && s[2] == H_ && s[3] == W_, d.where(), ": (channels, height, width) = (", s[1],
                        ", ", s[2], ", ", s[3], ") differs from ", paths_[0], "'s (", C_, ", ", H_, ", ", W_, ")");
    }
    ENGINE_USER_CHECK(s[0] > opt.dt, d.where(), ": ", s[0], " time steps, too few for dt = ", opt.dt);
    first_.push_back(first_.back() + s[0] - opt.dt);
  }
  total_ = first_.back();

  h_ = opt.height > 0 ? opt.height : H_;
  w_ = opt.width > 0 ? opt.width : W_;
  ENGINE_USER_CHECK(h_ <= H_ && w_ <= W_, fields_[0]->where(), ": crop ", h_, " x ", w_, " is larger than the fields' ",
                    H_, " x ", W_);
  auto all = [&] {
    std::vector<int> v(static_cast<size_t>(C_));
    for (int c = 0; c < int(C_); ++c) v[size_t(c)] = c;
    return v;
  };
  in_ = opt.in_channels.empty() ? all() : opt.in_channels;
  out_ = opt.out_channels.empty() ? all() : opt.out_channels;
  for (const auto* list : {&in_, &out_})
    for (int c : *list)
      ENGINE_USER_CHECK(c >= 0 && c < C_, fields_[0]->where(), ": channel ", c, " does not exist (", C_, " channels)");
  in_runs_ = runs_of(in_);
  out_runs_ = runs_of(out_);

  ENGINE_USER_CHECK(!opt.stats.empty(), "weather: a stats file (per-channel mean and std) is required");
  std::unique_ptr<h5::File> stats;
  if (std::filesystem::is_directory(opt.stats)) {
    read_npy_stats(opt.stats);
  } else {
    stats = std::make_unique<h5::File>(opt.stats);
    mean_ = read_stat(*stats, "mean", C_);
    std_ = read_stat(*stats, "std", C_);
  }
  for (int64_t c = 0; c < C_; ++c)
    ENGINE_USER_CHECK(std::isfinite(mean_[size_t(c)]) && std_[size_t(c)] > 0 && std::isfinite(std_[size_t(c)]),
                      opt.stats, ": channel ", c, " has mean ", mean_[size_t(c)], " and std ", std_[size_t(c)],
                      " (std must be positive and finite)");
  if (stats && stats->has("climatology")) clim_ = read_climatology(*stats, C_, h_, w_, out_, mean_, std_);

  lat_.resize(size_t(h_));
  if (files_[0]->has("lat")) {
    const h5::Dataset lat(*files_[0], "lat");
    ENGINE_USER_CHECK(lat.rank() == 1 && lat.shape()[0] == H_, lat.where(), ": expected ", H_, " latitudes");
    std::vector<float> all_lat(static_cast<size_t>(H_));
    const int64_t z = 0;
    lat.read({&z, 1}, lat.shape(), all_lat.data());
    for (int64_t i = 0; i < h_; ++i) lat_[size_t(i)] = all_lat[size_t(i)];
  } else {
    // The NERSC tutorial's and FourCastNet's convention (their metrics'
    // lat(j) = 90 - 180 j / (num_lat - 1), num_lat the rows the metrics
    // see): the crop's rows evenly from +90 to -90, both poles included.
    for (int64_t i = 0; i < h_; ++i) lat_[size_t(i)] = h_ > 1 ? 90.0 - 180.0 * double(i) / double(h_ - 1) : 0.0;
  }
}

void WeatherDataset::read_npy_stats(const std::string& dir) {
  // The tutorial's stats/ directory: global_means.npy and global_stds.npy
  // of shape (1, C, 1, 1); time_means.npy (1, C, H, W), if there, is the
  // climatology.
  auto per_channel = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    ENGINE_USER_CHECK(std::filesystem::exists(path), dir, ": a stats directory needs ", name,
                      " (NumPy, shape (1, C, 1, 1), as the NERSC tutorial's stats/); or pass an HDF5 stats file");
    NpyArray a = read_npy(path);
    ENGINE_USER_CHECK(int64_t(a.values.size()) == C_, path, ": ", a.values.size(), " values, but the fields have ", C_,
                      " channels (a stats file for other data?)");
    return a.values;
  };
  mean_ = per_channel("global_means.npy");
  std_ = per_channel("global_stds.npy");
  const std::string tm = dir + "/time_means.npy";
  if (!std::filesystem::exists(tm)) return;
  const NpyArray a = read_npy(tm);
  std::vector<int64_t> s = a.shape;
  if (s.size() == 4 && s[0] == 1) s.erase(s.begin());
  std::string got;
  for (size_t d = 0; d < a.shape.size(); ++d) got += cat(d ? ", " : "", a.shape[d]);
  ENGINE_USER_CHECK(s.size() == 3 && s[0] == C_ && s[1] >= h_ && s[2] >= w_, tm, ": shape (", got,
                    a.shape.size() == 1 ? "," : "", "), expected (1, ", C_, ", at least ", h_, ", at least ", w_,
                    "): the climatology of these fields' ", C_,
                    " channels at their full size (or leave the file out: no ACC then)");
  clim_.resize(out_.size() * size_t(h_ * w_));
  for (size_t k = 0; k < out_.size(); ++k)
    for (int64_t r = 0; r < h_; ++r) {
      const float* src = a.values.data() + (int64_t(out_[k]) * s[1] + r) * s[2];
      float* dst = clim_.data() + (int64_t(k) * h_ + r) * w_;
      std::copy(src, src + w_, dst);
      normalize(dst, w_, mean_[size_t(out_[k])], std_[size_t(out_[k])]);
    }
}

WeatherDataset::~WeatherDataset() = default;

std::vector<int64_t> WeatherDataset::input_shape() const { return {int64_t(in_.size()), h_, w_}; }
std::vector<int64_t> WeatherDataset::target_shape() const { return {int64_t(out_.size()), h_, w_}; }

int64_t WeatherDataset::bytes_per_sample() const {
  return int64_t(in_.size() + out_.size()) * h_ * w_ * int64_t(h5::elem_size(fields_[0]->type()));
}

std::string WeatherDataset::describe() const {
  return cat(opt_.dir, ": ", paths_.size(), " files, ", total_, " samples of ", in_.size(), " -> ", out_.size(),
             " channels, ", h_, " x ", w_, " (of ", H_, " x ", W_, "), dt ", opt_.dt,
             clim_.empty() ? ", no climatology, " : ", climatology, ", h5::elem_name(fields_[0]->type()), " ",
             fields_[0]->layout());
}

std::pair<int, int64_t> WeatherDataset::locate(int64_t index) const {
  ENGINE_CHECK(index >= 0 && index < total_, opt_.dir, ": sample ", index, " outside [0, ", total_, ")");
  const auto it = std::upper_bound(first_.begin(), first_.end(), index);
  const int file = int(it - first_.begin()) - 1;
  return {file, index - first_[size_t(file)]};
}

void WeatherDataset::read_channels(int file, int64_t t, const std::vector<std::pair<int, int>>& runs,
                                   float* out) const {
  float* dst = out;
  for (auto [c0, n] : runs) {
    const int64_t start[4] = {t, c0, 0, 0}, count[4] = {1, n, h_, w_};
    fields_[size_t(file)]->read(start, count, dst, opt_.read_path);
    for (int k = 0; k < n; ++k, dst += h_ * w_)
      if (opt_.normalize) normalize(dst, h_ * w_, mean_[size_t(c0 + k)], std_[size_t(c0 + k)]);
  }
}

void WeatherDataset::read(int64_t index, float* x, void* y) const {
  const auto [file, t] = locate(index);
  read_channels(file, t, in_runs_, x);
  read_channels(file, t + opt_.dt, out_runs_, static_cast<float*>(y));
}

}  // namespace eng
