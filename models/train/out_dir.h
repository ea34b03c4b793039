// The run's output directory (--out_dir): what a run may do to it, and who
// holds it. Two guards, both decided by rank 0 and told to every rank, so a
// refusal is one line and every rank exits:
//   - an earlier run's files (a checkpoint, metrics.jsonl, tb/'s event files) are never replaced
//     by a fresh run: it is refused, naming --resume (continue it),
//     --overwrite (delete them and start again) or another --out_dir;
//   - a live job holds the directory through an flock on out_dir/run.lock,
//     taken by rank 0 for the whole run (the kernel drops it when the process
//     ends, even by kill -9, so a crash leaves no stale lock); a second job
//     is refused, naming the holder's pid, host and start time.
// The lock is taken as soon as the directory exists (before a --resume reads
// the checkpoint), and otherwise when the run first writes (begin_output),
// so a run refused for bad input creates nothing; on a file system without
// flock the run goes on unguarded, with a note.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace eng::models {

// auto_resume (--resume auto, a requeued job): resume when out_dir holds a
// checkpoint, else fresh; rank 0 decides once, after a torn save's recovery.
enum class OutDirMode { fresh, resume, overwrite, auto_resume };
// --resume (true, false or "auto") and --overwrite (refused together by validate_config).
OutDirMode out_dir_mode(const nlohmann::json& resume, bool overwrite);

class OutDir {
 public:
  // Every rank (a collective): the guards above, against the directory as it
  // is now. Throws WorldError on every rank when refused.
  OutDir(std::string path, OutDirMode mode);
  ~OutDir();
  OutDir(const OutDir&) = delete;
  OutDir& operator=(const OutDir&) = delete;

  // Every rank (a collective), once every input is valid: rank 0 creates the
  // directory, takes the lock if it could not before, and with --overwrite
  // deletes the earlier run's checkpoint and metrics.
  void begin_output();
  const std::string& path() const { return path_; }
  // The run continues a checkpoint (--resume, or --resume auto that found one).
  bool resuming() const { return mode_ == OutDirMode::resume; }
  // --resume auto's verdict for the log ("" otherwise).
  const std::string& auto_note() const { return auto_note_; }
  // Where the TensorBoard event file goes for --tensorboard `option`:
  // "" -> out_dir/tb, "off" -> "" (none), else the directory given.
  std::string tensorboard_dir(const std::string& option) const;

 private:
  std::string lock();   // rank 0: "" or why the lock is refused
  std::string claim();  // rank 0, once the directory exists: the lock, then the earlier-run check
  std::string path_;
  OutDirMode mode_;
  bool claimed_ = false;  // rank 0: claim() ran
  int lock_fd_ = -1;      // rank 0, while it holds run.lock
  std::string auto_note_;
};

}  // namespace eng::models
