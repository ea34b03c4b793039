// Weather fields in the NERSC / ERA5 layout: a directory of HDF5 files (one per
// year, read in name order), each with a dataset `fields` of shape
// (time, channels, height, width), float32 (or any type io/hdf5 reads).
// Sample i is the pair (fields[t], fields[t + dt]) within one file: input the
// in_channels of step t, target the out_channels of step t + dt, both cropped
// to height x width from the top-left corner (the tutorial's crop) and each
// channel normalised as (v - mean[c]) / std[c] with the stats file's values.
// A file with T steps gives T - dt samples; sample indices run through the
// files in order.
// Stats file: datasets `mean` and `std` with one value per channel (shape (C)
// or the tutorial's (1, C, 1, 1)); optionally `climatology` (C, H, W), each
// point's time mean, kept cropped, for the out_channels and normalised like
// the targets, so a forecast's anomaly correlation (ACC) is taken against it
// in the units the model predicts in. Or a directory laid out as the NERSC
// tutorial's stats/: global_means.npy, global_stds.npy (1, C, 1, 1) and
// optionally time_means.npy (1, C, H, W), the climatology.
// Latitudes: a dataset `lat` (height) in the first file, in degrees, if
// present; otherwise the tutorial's and FourCastNet's, the crop's rows
// evenly from +90 to -90, poles included (90 - 180 j / (height - 1)). Normalisation runs on the reader threads, as part
// of the conversion pass every value goes through anyway.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/hdf5.h"
#include "io/sample_dataset.h"

namespace eng {

struct WeatherOptions {
  std::string dir;                // directory of *.h5 files
  std::string stats;              // HDF5 file with `mean`, `std` (and optionally `climatology`), or a stats/ directory
  int64_t dt = 1;                 // steps ahead the target is
  int64_t height = 0, width = 0;  // crop; 0 takes the whole extent
  std::vector<int> in_channels;   // empty: every channel
  std::vector<int> out_channels;  // empty: every channel
  h5::ReadPath read_path = h5::ReadPath::automatic;
  bool normalize = true;  // false: raw values (bench/loader measures what normalising costs)
};

class WeatherDataset : public SampleDataset {
 public:
  explicit WeatherDataset(const WeatherOptions& opt);
  ~WeatherDataset() override;
  int64_t size() const override { return total_; }
  std::vector<int64_t> input_shape() const override;
  std::vector<int64_t> target_shape() const override;
  DType target_dtype() const override { return DType::f32; }
  void read(int64_t index, float* x, void* y) const override;
  int64_t bytes_per_sample() const override;
  std::string describe() const override;

  const std::vector<std::string>& files() const { return paths_; }
  int64_t channels() const { return C_; }  // in the files
  int64_t height() const { return h_; }    // after the crop
  int64_t width() const { return w_; }
  const std::vector<int>& in_channels() const { return in_; }
  const std::vector<int>& out_channels() const { return out_; }
  const std::vector<double>& latitudes() const { return lat_; }  // of the crop's rows, degrees
  const std::vector<float>& means() const { return mean_; }
  const std::vector<float>& stds() const { return std_; }
  // Normalised climatology of the out_channels, (out_channels, height, width)
  // row-major; empty when the stats file has none.
  const std::vector<float>& climatology() const { return clim_; }
  // File and time step of sample `index`.
  std::pair<int, int64_t> locate(int64_t index) const;

 private:
  // Reads one box per run of consecutive channels (runs_of(in_) etc., made
  // at open so a sample allocates nothing) and normalises it.
  void read_channels(int file, int64_t t, const std::vector<std::pair<int, int>>& runs, float* out) const;
  void read_npy_stats(const std::string& dir);  // mean_, std_ and clim_ from the tutorial's stats/

  WeatherOptions opt_;
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<h5::File>> files_;
  std::vector<std::unique_ptr<h5::Dataset>> fields_;
  std::vector<int64_t> first_;  // first sample index of each file; first_.back() == total_
  int64_t total_ = 0, C_ = 0, H_ = 0, W_ = 0, h_ = 0, w_ = 0;
  std::vector<int> in_, out_;
  std::vector<std::pair<int, int>> in_runs_, out_runs_;  // (first channel, count)
  std::vector<float> mean_, std_, clim_;
  std::vector<double> lat_;
};

// Parses "0,2,5" or "0-3" (or a mix, "0-2,5") into channel numbers.
std::vector<int> parse_channels(const std::string& s);

}  // namespace eng
