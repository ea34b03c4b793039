// A group: a named subset of the world's ranks that communicate together
// (the whole world, one dp group, one tp group). It owns the MPI
// communicator of those ranks (MPI builds); a Communicator (communicator.h)
// is built on a group for one device and backend.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace eng::comm {

struct GroupHandle;  // the MPI communicator (mpi_util.h)

class Group {
 public:
  Group();                     // this process alone ("self")
  static Group world_group();  // every rank (MPI_COMM_WORLD)
  // Collective over this group: ranks with the same color form one new
  // group, ordered by key. (MPI_Comm_split.)
  Group split(const std::string& name, int color, int key) const;

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return int(world_ranks_.size()); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }  // world rank of each group rank
  GroupHandle* handle() const { return handle_.get(); }                 // null for a group of one without MPI

 private:
  std::string name_ = "self";
  int rank_ = 0;
  std::vector<int> world_ranks_;
  std::shared_ptr<GroupHandle> handle_;
};

}  // namespace eng::comm
