// What strangers may hold of a port before they prove membership: a budget of handshakes under
// way, in all and per source address, where a newcomer over the budget ends the oldest
// handshake (its source's oldest when its source is over its share) rather than being refused.
// Strangers that connect and say nothing so churn their own slots: a member's handshake, which
// lasts a round trip, finds room whatever they hold. And a bounded log of the refusals: a burst
// of lines, then one a second, each saying how many were not logged.
//
//   HandshakeBudget budget(64, 16);
//   if (uint64_t evict = budget.admit(id, source)) end(evict);   // then budget.done(evict)
//   ... budget.done(id) when the handshake passed or failed
//
//   LogLimiter limit;  if (auto more = limit.allow()) log_warning(..., *more, " more not logged");
//
// Not thread-safe: one owner (a server's accepting thread), or the owner's lock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace troupe::actors::net {

// A budget (in all, or per source) with room for twice the `connections` a cluster's members
// dial at once when a job starts (one a member on CAF's port, each session's data channels on
// the data port), and never less than `at_least` (the strangers' default): a member's handshake
// ended for a newer one fails its first connection (64 workers on one machine, all from
// 127.0.0.1, had theirs ended by a per-source budget of 16, and restarted).
inline int handshake_budget(size_t connections, int at_least) {
  return std::max(at_least, static_cast<int>(2 * connections));
}

class HandshakeBudget {
 public:
  HandshakeBudget(int total, int per_source) : total_(total), per_source_(per_source) {}
  // Counts handshake `id` (larger than every earlier one) from `source`: the handshake to end
  // now to make room for it, or 0.
  uint64_t admit(uint64_t id, uint32_t source);
  void done(uint64_t id);
  int under_way() const { return static_cast<int>(sources_.size()); }

 private:
  const int total_, per_source_;
  std::map<uint64_t, uint32_t> sources_;  // id -> source, oldest first
  std::map<uint32_t, int> counts_;
};

// A token bucket of log lines: `burst` at once, then one each `every`.
class LogLimiter {
 public:
  explicit LogLimiter(int burst = 8, std::chrono::milliseconds every = std::chrono::seconds(1))
      : burst_(burst), every_(every), tokens_(burst) {}
  // Whether to log now; when so, how many lines were held back since the last one.
  std::optional<uint64_t> allow();

 private:
  const int burst_;
  const std::chrono::milliseconds every_;
  int tokens_;
  std::chrono::steady_clock::time_point refilled_ = std::chrono::steady_clock::now();
  uint64_t held_back_ = 0;
};

}  // namespace troupe::actors::net
