// SyncStamp: the global step a synchronous replica's step read, which each of that step's
// updates carries to its shard (SyncTag::stamp, as TF's SyncReplicasOptimizer stamps a worker's
// gradients with its local step), so that every shard counts the step's updates in the same
// round (actors/sync_rounds.h). The session's node actors share one: the one whose remote call
// reads global_step sets it for its step, and an update reads it for its own step; the graph
// orders a synchronous replica's updates after that read (estimators/model_graph.cc), and an
// update whose step has no read gets -1, rounds by its reads of each variable.
//
//   auto stamp = std::make_shared<SyncStamp>();
//   stamp->set(step, 41);            // step `step` read global_step 41
//   int64_t s = stamp->of(step);     // 41; -1 for a step that has not read it
//
// Thread-safe: node actors run on any of CAF's threads.
#pragma once

#include <cstdint>
#include <mutex>

namespace troupe::actors {

class SyncStamp {
 public:
  void set(uint64_t step, int64_t global_step) {
    std::lock_guard<std::mutex> lock(mu_);
    step_ = step;
    global_step_ = global_step;
  }
  int64_t of(uint64_t step) const {
    std::lock_guard<std::mutex> lock(mu_);
    return step_ == step ? global_step_ : -1;
  }

 private:
  mutable std::mutex mu_;
  uint64_t step_ = UINT64_MAX;  // no step's
  int64_t global_step_ = -1;
};

}  // namespace troupe::actors
