#include "actors/net/handshake_budget.h"

#include <algorithm>

namespace troupe::actors::net {

uint64_t HandshakeBudget::admit(uint64_t id, uint32_t source) {
  uint64_t evict = 0;
  if (counts_[source] >= per_source_) {
    for (const auto& [old, from] : sources_) {
      if (from == source) {
        evict = old;
        break;
      }
    }
  } else if (static_cast<int>(sources_.size()) >= total_ && !sources_.empty()) {
    evict = sources_.begin()->first;
  }
  sources_.emplace(id, source);
  ++counts_[source];
  return evict;
}

void HandshakeBudget::done(uint64_t id) {
  auto it = sources_.find(id);
  if (it == sources_.end()) return;
  if (--counts_[it->second] <= 0) counts_.erase(it->second);
  sources_.erase(it);
}

std::optional<uint64_t> LogLimiter::allow() {
  const auto now = std::chrono::steady_clock::now();
  const auto earned = (now - refilled_) / every_;
  if (earned > 0) {
    tokens_ = static_cast<int>(std::min<int64_t>(burst_, tokens_ + earned));
    refilled_ += earned * every_;
  }
  if (tokens_ == 0) {
    ++held_back_;
    return std::nullopt;
  }
  --tokens_;
  const uint64_t held = held_back_;
  held_back_ = 0;
  return held;
}

}  // namespace troupe::actors::net
