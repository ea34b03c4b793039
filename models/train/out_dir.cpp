// Output-directory guards: the fresh-run refusal and the run lock (see out_dir.h).
#include "models/train/out_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "comm/world.h"
#include "io/tensorboard.h"
#include "models/checkpoint.h"
#include "models/train/train_dist.h"

namespace eng::models {

namespace fs = std::filesystem;

namespace {

// What an earlier run left in `dir`, for the refusal ("" if nothing).
std::string earlier_run(const fs::path& dir) {
  std::string what;
  const fs::path state = dir / "checkpoint" / "state.json";
  if (fs::exists(state)) {
    std::string step = "?", steps = "?";
    try {
      std::ifstream in(state);
      const nlohmann::json j = nlohmann::json::parse(in);
      step = j.at("step").dump();
      steps = j.at("config").at("steps").dump();
    } catch (const std::exception&) {  // described as far as it can be read
    }
    what = cat("checkpoint/ at step ", step, " of ", steps);
  }
  const fs::path metrics = dir / "metrics.jsonl";
  if (fs::exists(metrics)) {
    std::ifstream in(metrics);
    int64_t lines = 0;
    for (std::string l; std::getline(in, l);) ++lines;
    what += cat(what.empty() ? "" : ", ", "metrics.jsonl with ", lines, " lines");
  }
  if (const int64_t n = int64_t(tb_event_files((dir / "tb").string()).size()))
    what += cat(what.empty() ? "" : ", ", "tb/ with ", n, " event file", n == 1 ? "" : "s");
  return what;
}

std::string now_utc() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// Rank 0's verdict ("" or the error), on every rank.
void tell_everyone(const std::string& error) {
  const std::string verdict = comm::broadcast_string(error, 0, "rank 0's verdict on --out_dir");
  if (!verdict.empty()) throw WorldError(verdict);
}

}  // namespace

std::string OutDir::lock() {
  const fs::path file = fs::path(path_) / "run.lock";
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return cat(file.string(), ": cannot open: ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    std::getline(std::ifstream(file), holder);
    ::close(fd);
    if (err == ENOSYS || err == EOPNOTSUPP || err == ENOLCK) {
      // Some parallel file systems (Lustre mounted without -o flock) have none:
      // the run goes on, unguarded against a second job, and says so.
      std::printf("note: %s: this file system has no flock (%s): nothing stops a second job on this out_dir\n",
                  file.c_str(), std::strerror(err));
      return "";
    }
    if (err != EWOULDBLOCK) return cat(file.string(), ": cannot lock: ", std::strerror(err));
    return cat(path_, " is in use by another run (", holder.empty() ? "its pid not yet written" : holder,
               "): wait for it to end, or pick another --out_dir");
  }
  const std::string me = cat("pid ", ::getpid(), " on host ", comm::world().host, " since ", now_utc(), " (",
                             comm::world().size, comm::world().size == 1 ? " process)" : " processes)");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, (me + "\n").data(), me.size() + 1, 0) != ssize_t(me.size() + 1)) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return cat(file.string(), ": cannot write: ", why);
  }
  lock_fd_ = fd;
  return "";
}

std::string OutDir::claim() {
  claimed_ = true;
  const fs::path dir(path_);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return cat("out_dir ", path_, " is not a directory");
  if (std::string error = lock(); !error.empty()) return error;
  recover_checkpoint_dir((dir / "checkpoint").string());
  if (mode_ == OutDirMode::auto_resume)
    mode_ = fs::exists(dir / "checkpoint" / "state.json") ? OutDirMode::resume : OutDirMode::fresh;
  const std::string earlier = earlier_run(dir);
  if (earlier.empty() || mode_ != OutDirMode::fresh) return "";
  const bool resumable = fs::exists(dir / "checkpoint" / "state.json");
  return cat(path_, " holds an earlier run (", earlier, "): ", resumable ? "--resume to continue it, " : "",
             "--overwrite to delete it and start again, or another --out_dir");
}

OutDirMode out_dir_mode(const nlohmann::json& resume, bool overwrite) {
  return resume == "auto" ? OutDirMode::auto_resume
         : resume == true ? OutDirMode::resume
         : overwrite      ? OutDirMode::overwrite
                          : OutDirMode::fresh;
}

OutDir::OutDir(std::string path, OutDirMode mode) : path_(std::move(path)), mode_(mode) {
  std::string error;
  std::error_code ec;
  if (comm::world().rank == 0 && fs::exists(path_, ec)) error = claim();
  if (!error.empty() && lock_fd_ >= 0) ::close(lock_fd_), lock_fd_ = -1;  // refused: the destructor will not run
  tell_everyone(error);
  if (mode_ == OutDirMode::auto_resume || mode == OutDirMode::auto_resume) {
    if (mode_ == OutDirMode::auto_resume) mode_ = OutDirMode::fresh;  // no directory yet: nothing to resume
    const std::string verdict = comm::broadcast_string(resuming() ? "resume" : "fresh", 0, "rank 0's --resume auto");
    mode_ = verdict == "resume" ? OutDirMode::resume : OutDirMode::fresh;
    auto_note_ = resuming() ? cat("resume auto: ", path_, " holds a checkpoint: continuing it")
                            : cat("resume auto: no checkpoint in ", path_, ": a fresh run");
  }
}

std::string OutDir::tensorboard_dir(const std::string& option) const {
  if (option == "off") return "";
  return option.empty() ? (fs::path(path_) / "tb").string() : option;
}

OutDir::~OutDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // the flock goes with the descriptor
}

void OutDir::begin_output() {
  std::string error;
  if (comm::world().rank == 0) {
    try {
      fs::create_directories(path_);
      // Absent at start-up, the directory may have been made since, by
      // another job that may hold it or have finished a run in it.
      if (!claimed_) error = claim();
      if (error.empty() && mode_ == OutDirMode::overwrite)
        for (const char* name :
             {"checkpoint", "checkpoint.tmp", "checkpoint.old", "checkpoints", "metrics.jsonl", "metrics.jsonl.tmp"})
          fs::remove_all(fs::path(path_) / name);
      if (error.empty() && mode_ == OutDirMode::overwrite)  // the event files only: tb/ may hold more
        for (const std::string& f : tb_event_files((fs::path(path_) / "tb").string())) fs::remove(f);
    } catch (const std::exception& e) {
      error = cat("out_dir ", path_, ": ", e.what());
    }
  }
  tell_everyone(error);
}

}  // namespace eng::models
