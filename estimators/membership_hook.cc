#include "estimators/membership_hook.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <set>
#include <utility>

#include "actors/sync_rounds.h"
#include "runtime/log.h"

namespace troupe::estimators {

using runtime::Status;

int round_size(const MembershipRounds& rounds, int live, bool any_gone) {
  if (rounds.aggregate <= 0) return 0;
  actors::SyncTag tag;
  tag.aggregate = static_cast<uint32_t>(rounds.aggregate);
  tag.min_aggregate = static_cast<uint32_t>(std::max(0, rounds.min_replicas));
  return static_cast<int>(
      actors::SyncRounds::round_size(tag, static_cast<size_t>(std::max(0, live)), any_gone));
}

std::string replica_list(const std::vector<int>& replicas,
                         const std::function<std::string(int)>& name) {
  // Names are "chief" or "<job> <index>": each job once, its consecutive indices as a range.
  std::vector<std::pair<std::string, std::vector<int>>> jobs;
  for (int r : replicas) {
    const std::string n = name(r);
    const size_t space = n.rfind(' ');
    const std::string job = space == std::string::npos ? n : n.substr(0, space);
    if (jobs.empty() || jobs.back().first != job) jobs.push_back({job, {}});
    if (space != std::string::npos) jobs.back().second.push_back(std::atoi(n.c_str() + space + 1));
  }
  std::string out;
  for (const auto& [job, indices] : jobs) {
    std::string ranges;
    for (size_t i = 0; i < indices.size();) {
      size_t j = i;
      while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(indices[i]) +
                (j > i ? "-" + std::to_string(indices[j]) : "");
      i = j + 1;
    }
    out += (out.empty() ? "" : ", ") + job;
    if (!indices.empty()) out += (indices.size() > 1 ? "s " : " ") + ranges;
  }
  return out;
}

namespace {

class MembershipHook : public SessionRunHook {
 public:
  MembershipHook(std::function<runtime::Result<std::vector<int>>()> live,
                 std::function<std::string(int)> name, MembershipRounds rounds)
      : live_(std::move(live)), name_(std::move(name)), rounds_(rounds) {}

  Status after_run(StepContext&) override {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return runtime::ok_status();
    next_ = now + rounds_.every;
    runtime::Result<std::vector<int>> live = live_();
    if (!live.ok()) {
      if (!failing_) runtime::log_warning("cluster: who trains: ", live.status().to_string());
      failing_ = true;
      return runtime::ok_status();
    }
    failing_ = false;
    if (looked_ && *live == last_) return runtime::ok_status();
    std::vector<int> left, joined;
    std::set_difference(last_.begin(), last_.end(), live->begin(), live->end(),
                        std::back_inserter(left));
    std::set_difference(live->begin(), live->end(), last_.begin(), last_.end(),
                        std::back_inserter(joined));
    std::string line = "cluster: ";
    if (looked_) {
      if (!left.empty()) line += replica_list(left, name_) + " left; ";
      if (!joined.empty()) line += replica_list(joined, name_) + " joined; ";
    }
    seen_.insert(live->begin(), live->end());
    const int n = static_cast<int>(live->size());
    line += std::to_string(n) + (n == 1 ? " replica trains (" : " replicas train (") +
            replica_list(*live, name_) + ")";
    if (rounds_.aggregate > 0) {
      // Some are gone when a replica seen before is not live now, as the ps counts them.
      const bool any_gone = seen_.size() > live->size();
      line += "; rounds aggregate " + std::to_string(round_size(rounds_, n, any_gone));
      if (rounds_.min_replicas > 0) {
        line += " (--min-replicas " + std::to_string(rounds_.min_replicas) + ", at most " +
                std::to_string(rounds_.aggregate) + ")";
      }
    }
    runtime::log_info(line);
    last_ = std::move(*live);
    looked_ = true;
    return runtime::ok_status();
  }
  bool blocks() const override { return true; }  // asks a ps task

 private:
  std::function<runtime::Result<std::vector<int>>()> live_;
  std::function<std::string(int)> name_;
  MembershipRounds rounds_;
  std::chrono::steady_clock::time_point next_{};
  std::vector<int> last_;
  std::set<int> seen_;  // every replica live at some look
  bool looked_ = false;
  bool failing_ = false;
};

}  // namespace

std::shared_ptr<SessionRunHook> membership_hook(
    std::function<runtime::Result<std::vector<int>>()> live, std::function<std::string(int)> name,
    MembershipRounds rounds) {
  return std::make_shared<MembershipHook>(std::move(live), std::move(name), rounds);
}

}  // namespace troupe::estimators
