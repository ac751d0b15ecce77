// The chief's log of who trains: which training replicas (the chief, workers) joined and left,
// and how many replicas a synchronous round aggregates now, as the ps of the global step sees
// them (a replica is live while it has a connection open there and rounds count on it).
//
//   auto hook = membership_hook([&] { return member.live_replicas(); },
//                               [&](int r) { return member.replica_name(r); },
//                               {.aggregate = 64, .min_replicas = 2});
//   // logs, at most once a second after a step:
//   //   "cluster: worker 3 left; worker 7 joined; 63 replicas train (chief, workers 0-2, 4-62);
//   //    rounds aggregate 63 (--min-replicas 2, at most 64)"
//
// A failed look (a ps gone) is logged once and tried again a second later; training goes on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "estimators/hooks.h"
#include "runtime/status.h"

namespace troupe::estimators {

struct MembershipRounds {
  int aggregate = 0;     // replicas_to_aggregate: 0 for asynchronous training
  int min_replicas = 0;  // elastic rounds: at least this many (RunConfig::min_replicas)
  std::chrono::milliseconds every{1000};
};

// The number of replicas a round opening now aggregates with `live` replicas training, some
// gone or not, by the ps's rule (SyncRounds::round_size); 0 for asynchronous training.
int round_size(const MembershipRounds& rounds, int live, bool any_gone);

// "chief, workers 0-2, 4, 9-11" for replicas 0-3, 5, 10-12 named by `name`.
std::string replica_list(const std::vector<int>& replicas,
                         const std::function<std::string(int)>& name);

std::shared_ptr<SessionRunHook> membership_hook(
    std::function<runtime::Result<std::vector<int>>()> live, std::function<std::string(int)> name,
    MembershipRounds rounds);

}  // namespace troupe::estimators
