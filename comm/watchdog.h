// The --comm_timeout watchdog. A collective that never completes (a rank
// crashed before entering it, stalls, or called a different collective)
// would leave its peers waiting forever; PyTorch's NCCL watchdog and NCCL's
// own timeout exist for that. Every collective issued through a
// Communicator is recorded here with a description (op, group, size, this
// rank's collective number, and what it carries, e.g. "gradient bucket 2 of
// 3"); a thread checks the oldest one every 100 ms and, past the timeout,
// prints which collective did not complete on which rank and ends the job.
// Coverage: cpu and emu collectives (eager; an emulated graph's replay runs
// them inside the replay, uncovered); on cuda, until Work::wait() hands the
// collective to the stream (the GPU side is NCCL's own error reporting);
// and every host-side call that waits for other ranks (WatchedCall).
#pragma once
#include <cstdint>
#include <string>

namespace eng::comm {

uint64_t op_begin(const std::string& what);  // a Communicator's collective; returns the op's id
void op_end(uint64_t id);
// Any other blocking call that waits for the other ranks, watched for its
// lifetime: the world's host-side agreement (config, loss, validation sums,
// barriers, world.h), a group's or a communicator's creation. Not numbered
// among the collectives (ops_issued).
class WatchedCall {
 public:
  explicit WatchedCall(const std::string& what);
  ~WatchedCall();
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  uint64_t id_;
};
// What the next collectives on this thread carry ("gradient bucket 2 of 3"); "" clears it.
void set_op_label(const std::string& label);
const std::string& op_label();
uint64_t ops_issued();  // collectives this process has issued (1-based numbers in the messages)

// Starts the watchdog thread (timeout_s > 0), once per process; it ends the
// job (abort_world) when a collective stays incomplete for timeout_s.
void start_watchdog(double timeout_s);

// Test-only: ENGINE_FAULT=stall:RANK:N makes world rank RANK stall forever
// instead of issuing its N-th collective, as a hung or slow rank would;
// ENGINE_FAULT=stall:RANK:TEXT, instead of entering the first WatchedCall
// whose description contains TEXT.
void maybe_stall(uint64_t seq);

}  // namespace eng::comm
