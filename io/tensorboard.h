// TensorBoard event files: a run's scalars, read by `tensorboard --logdir`.
//
// The file is TensorFlow's record format: each record is
//   uint64 length | uint32 masked CRC-32C of the 8 length bytes | data | uint32 masked CRC-32C of data
// (little-endian; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8), and
// each record's data is one `Event` protocol buffer. Only three messages are
// written, so they are encoded here by hand rather than through libprotobuf
// (a large dependency for three messages of a few fields each):
//   Event      1 wall_time (double), 2 step (int64), 3 file_version (string),
//              5 summary (Summary), 7 session_log (SessionLog)
//   Summary    1 value (repeated Value);  Value: 1 tag (string), 2 simple_value (float)
//   SessionLog 1 status (enum; START = 1)
// The first record says file_version "brain.Event:2". A SessionLog START at
// step S tells TensorBoard that the run (re)started at S: it drops what
// earlier files hold for steps >= S, so a run resumed from a checkpoint
// continues its curves without drawing the replayed steps twice.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace eng {

// CRC-32C (Castagnoli), as TensorFlow's records use it, and its masked form.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// Protocol-buffer encodings of the three messages above (exposed for tests).
std::string tb_scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values);
std::string tb_start_event(double wall_time, int64_t step);
std::string tb_version_event(double wall_time);
// One record around `data`.
std::string tb_record(const std::string& data);

// Event files are named events.out.tfevents.<time>....; those in `dir` (none if it does not exist).
inline const std::string kTbPrefix = "events.out.tfevents.";
std::vector<std::string> tb_event_files(const std::string& dir);

class TbWriter {
 public:
  // Creates `dir` and a new file in it, events.out.tfevents.<time>.<host>.<pid>.<n>
  // (never an existing one; <time> later than any earlier file's, as
  // TensorBoard reads them in name order), starting with the version record
  // and a SessionLog START at `first_step`. Throws naming the path on failure.
  TbWriter(const std::string& dir, int64_t first_step);
  ~TbWriter();
  TbWriter(const TbWriter&) = delete;
  TbWriter& operator=(const TbWriter&) = delete;

  // One event holding `values` at `step`, written and flushed (a live
  // TensorBoard follows the run). Returns "" or the write error
  // ("<path>: write failed: No space left on device").
  std::string scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values);
  const std::string& path() const { return path_; }

 private:
  std::string write(const std::string& record);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace eng
