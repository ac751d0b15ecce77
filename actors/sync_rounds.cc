#include "actors/sync_rounds.h"

#include <algorithm>

#include "runtime/log.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

using runtime::DType;
using runtime::Status;
using runtime::Tensor;

namespace {

SyncRounds::Reply error_reply(const Status& s) { return make_shard_reply(s, {}); }

SyncRounds::Reply value_reply(const Tensor& t) {
  return make_shard_reply(runtime::ok_status(), {t});
}

SyncRounds::Reply value_reply_none() { return make_shard_reply(runtime::ok_status(), {}); }

const std::string* var_of(const ShardCall& call) {
  auto it = call.attrs.find("var");
  return it == call.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
}

bool floating(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

// out = (a + b) * by, elementwise, in one pass; `out` may be `a`.
template <class T>
void add_scaled(const Tensor& a, const Tensor& b, T by, Tensor& out) {
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* o = out.data<T>();
  for (int64_t i = 0; i < out.num_elements(); ++i) o[i] = (x[i] + y[i]) * by;
}

template <class T>
void scale(Tensor& sum, T by) {
  T* s = sum.data<T>();
  for (int64_t i = 0; i < sum.num_elements(); ++i) s[i] *= by;
}

template <class Replicas>
std::string names(const Replicas& replicas) {
  std::string out;
  for (int r : replicas) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

void SyncRounds::note_read(int replica, const std::string& var) {
  read_round_[{replica, var}] = round(var);
  if (seen_.insert(replica).second) runtime::log_debug("sync: replica ", replica, " joined");
  if (gone_.erase(replica) > 0) {
    runtime::log_info("sync: replica ", replica, " is back; rounds wait for it again");
  }
}

std::vector<int> SyncRounds::live() const {
  std::vector<int> out;
  std::set_difference(seen_.begin(), seen_.end(), gone_.begin(), gone_.end(),
                      std::back_inserter(out));
  return out;
}

size_t SyncRounds::round_size(const SyncTag& tag, size_t live, bool any_gone) {
  const size_t want = std::max<size_t>(floor(tag), tag.aggregate);
  if (tag.min_aggregate > 0) return std::clamp(live, floor(tag), want);
  if (!any_gone) return want;
  return std::max<size_t>(1, std::min(want, live));
}

size_t SyncRounds::needed(const SyncTag& tag) const {
  return round_size(tag, seen_.size() - gone_.size(), !gone_.empty());
}

void SyncRounds::leave(int replica) {
  if (seen_.count(replica) == 0 || !gone_.insert(replica).second) return;
  runtime::log_info("sync: replica ", replica,
                    " left (its connections closed); rounds go on without it until it reads again");
  const std::vector<int> others = live();
  std::vector<std::string> done;
  for (auto& [var, acc] : open_) {
    if (acc.replicas.count(replica) > 0) continue;
    // What the round can still get: what it has and the live replicas yet to send theirs.
    size_t could = acc.replicas.size();
    for (int r : others) could += acc.replicas.count(r) == 0 ? 1 : 0;
    acc.target = std::min(acc.target, std::max(could, floor(acc.call.sync)));
    if (acc.replicas.size() >= acc.target) done.push_back(var);
  }
  for (const std::string& var : done) close(var);
}

int64_t SyncRounds::round(const std::string& var) const {
  auto it = rounds_.find(var);
  return it == rounds_.end() ? 0 : it->second;
}

std::optional<int64_t> SyncRounds::global_step() const {
  return runtime::int64_scalar(read_("global_step"));
}

SyncRounds::Reply SyncRounds::current_value(const std::string& var) const {
  auto value = read_(var);
  return value.ok() ? value_reply(*value) : error_reply(value.status());
}

std::optional<SyncRounds::Reply> SyncRounds::contribute(ShardCall call,
                                                        const std::function<void(Reply)>& later,
                                                        Clock::time_point now) {
  const std::string* name = var_of(call);
  if (name == nullptr) return apply_(std::move(call));
  const std::string var = *name;
  const int replica = call.sync.replica;
  const int64_t stamp = call.sync.stamp;
  const bool discard = call.discard_outputs;
  auto as_is = [&] { return discard ? value_reply_none() : current_value(var); };
  auto open = open_.find(var);
  bool stale = false, passed_open = false;
  if (stamp >= 0) {
    // Stamped: its round is the global step it read, on every shard alike.
    auto closed = closed_stamp_.find(var);
    stale = (closed != closed_stamp_.end() && stamp <= closed->second) ||
            (open != open_.end() && stamp < open->second.stamp);
    passed_open =
        !stale && open != open_.end() && open->second.stamp >= 0 && open->second.stamp < stamp;
  } else {
    auto read = read_round_.find({replica, var});
    stale = read != read_round_.end() && read->second < round(var);
  }
  const bool again =
      !passed_open && open != open_.end() && open->second.replicas.count(replica) > 0;
  if (stale || again) {
    ++dropped_;
    runtime::log_debug("sync: dropped replica ", replica, "'s update of ", var, " (round ",
                       round(var), stamp >= 0 ? ", global step " + std::to_string(stamp) : "", ")");
    return as_is();
  }
  if (passed_open) {
    // The global step has passed the open round: the replicas it waits for read a later one
    // (a shard that counted a replica gone before this one did, a round closed at its time).
    runtime::log_info("sync: round of ", var, " at global step ", open->second.stamp,
                      " closed with replicas ", names(open->second.replicas), ": replica ", replica,
                      " sent one at global step ", stamp);
    close(var);
    open = open_.end();
  }
  if (open == open_.end()) {
    // The first contribution stands as it came, its inputs still in the frame they came in (which
    // they keep alive): when it is the round, nothing is copied; else the second makes the sum.
    const size_t target = needed(call.sync);
    open =
        open_.emplace(var, Accumulator{std::move(call), false, {}, target, now, {}, stamp}).first;
  } else if (Status s = add(open->second, call); !s.ok()) {
    runtime::log_warning("sync: refused replica ", replica, "'s update of ", var, ": ",
                         s.message());
    return error_reply(s);
  }
  Accumulator& acc = open->second;
  acc.replicas.insert(replica);
  seen_.insert(replica);
  if (acc.replicas.size() >= acc.target) {
    Reply applied = close(var);
    return discard && applied.status.ok() ? value_reply_none() : applied;
  }
  acc.waiting.emplace_back(later, discard);
  return std::nullopt;
}

// Adds `call`'s floating inputs (the gradients; the learning rates, equal, too) to the round's;
// the others (the global step's increment) stay the first's. The sum has a buffer of its own:
// the first contribution's lies in its frame, never written. The contribution that completes
// the round divides by the count in the same pass.
Status SyncRounds::add(Accumulator& acc, const ShardCall& call) {
  if (call.inputs.size() != acc.call.inputs.size()) {
    return runtime::invalid_argument(call.inputs.size(), " inputs, the round's first update had ",
                                     acc.call.inputs.size());
  }
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const Tensor& sum = acc.call.inputs[i];
    const Tensor& x = call.inputs[i];
    if (floating(sum.dtype()) && (x.dtype() != sum.dtype() || x.shape() != sum.shape())) {
      return runtime::invalid_argument("input ", i, " is ", runtime::dtype_name(x.dtype()),
                                       x.shape(), ", the round's first update's ",
                                       runtime::dtype_name(sum.dtype()), sum.shape());
    }
  }
  const size_t n = acc.replicas.size() + 1;
  acc.mean = n >= acc.target;
  const double by = acc.mean ? 1.0 / double(n) : 1.0;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    Tensor& sum = acc.call.inputs[i];
    const Tensor& x = call.inputs[i];
    if (!floating(sum.dtype())) continue;
    Tensor out;
    if (sum.exclusively_owned()) {
      out = sum;
    } else {
      TROUPE_ASSIGN_OR_RETURN(out,
                              Tensor::empty(sum.dtype(), sum.shape(), runtime::cpu_allocator()));
    }
    if (sum.dtype() == DType::kFloat32) {
      add_scaled<float>(sum, x, static_cast<float>(by), out);
    } else {
      add_scaled<double>(sum, x, by, out);
    }
    sum = std::move(out);
  }
  return runtime::ok_status();
}

SyncRounds::Reply SyncRounds::close(const std::string& var) {
  auto open = open_.find(var);
  Accumulator acc = std::move(open->second);
  open_.erase(open);
  const size_t n = acc.replicas.size();
  // A round its time closed short of replicas still holds their sum (of its own, with two or
  // more; one stands as it is).
  if (!acc.mean && n >= 2) {
    for (Tensor& sum : acc.call.inputs) {
      if (sum.dtype() == DType::kFloat32) scale<float>(sum, 1.0f / float(n));
      if (sum.dtype() == DType::kFloat64) scale<double>(sum, 1.0 / double(n));
    }
  }
  // An increment of the global step is one per round, not one per replica.
  acc.call.sync = SyncTag{};
  Reply applied = apply_(std::move(acc.call));
  ++rounds_[var];
  if (acc.stamp >= 0) {
    auto [closed, first] = closed_stamp_.emplace(var, acc.stamp);
    if (!first) closed->second = std::max(closed->second, acc.stamp);
  }
  for (auto& [reply, discard] : acc.waiting) {
    reply(discard && applied.status.ok() ? value_reply_none() : applied);
  }
  if (var == "global_step") release();
  return applied;
}

void SyncRounds::release() {
  const auto step = global_step();
  if (!step) return;
  auto done = [&](Waiter& w) {
    if (w.stamp >= *step) return false;
    w.reply(value_reply(Tensor::scalar<int64_t>(*step)));
    return true;
  };
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), done), waiters_.end());
}

std::optional<SyncRounds::Reply> SyncRounds::wait(const ShardCall& call,
                                                  const std::function<void(Reply)>& later,
                                                  Clock::time_point now) {
  if (call.inputs.size() != 1 || call.inputs[0].dtype() != DType::kInt64 ||
      call.inputs[0].num_elements() != 1) {
    return error_reply(runtime::invalid_argument("sync barrier: the step is no int64"));
  }
  const auto step = global_step();
  if (!step) {
    return error_reply(runtime::failed_precondition(
        "sync barrier: this ps holds no global_step (place the barrier beside it)"));
  }
  const int64_t stamp = call.inputs[0].data<int64_t>()[0];
  if (*step > stamp) return value_reply(Tensor::scalar<int64_t>(*step));
  const auto timeout = std::chrono::milliseconds(call.sync.aggregate_timeout_ms);
  waiters_.push_back(Waiter{stamp, later, now + timeout});
  return std::nullopt;
}

void SyncRounds::restart() {
  std::map<std::string, Accumulator> open;
  open.swap(open_);
  for (auto& [var, acc] : open) {
    dropped_ += static_cast<int64_t>(acc.replicas.size());
    for (auto& [reply, discard] : acc.waiting)
      reply(discard ? value_reply_none() : current_value(var));
  }
  runtime::log_info("sync: a model was loaded; rounds start over from its global step",
                    open.empty() ? "" : " (" + std::to_string(open.size()) + " open dropped)");
  rounds_.clear();
  read_round_.clear();
  closed_stamp_.clear();
  release();
}

void SyncRounds::expire(Clock::time_point now) {
  std::vector<std::string> due;
  for (const auto& [var, acc] : open_) {
    if (now >= acc.opened + std::chrono::milliseconds(acc.call.sync.aggregate_timeout_ms)) {
      due.push_back(var);
    }
  }
  for (const std::string& var : due) {
    Accumulator& acc = open_.at(var);
    std::set<int> missing;
    for (int r : seen_) {
      if (!acc.replicas.count(r)) missing.insert(r);
    }
    std::set<int> newly_gone;
    for (int r : missing) {
      if (gone_.insert(r).second) newly_gone.insert(r);
    }
    const size_t least = floor(acc.call.sync);
    if (acc.replicas.size() < least) {
      // Elastic rounds below --min-replicas wait for replicas to join, logged each timeout.
      runtime::log_warning("sync: round ", round(var), " of ", var,
                           " waits for replicas to join: ", acc.replicas.size(),
                           " sent theirs, at least ", least,
                           " needed (--min-replicas); live: ", names(live()));
      acc.opened = now;
      continue;
    }
    runtime::log_warning("sync: round ", round(var), " of ", var, " closed after ",
                         acc.call.sync.aggregate_timeout_ms, " ms with replicas ",
                         names(acc.replicas), " (", acc.replicas.size(), " of ", acc.target,
                         "); missing: ", missing.empty() ? "none seen" : names(missing),
                         " (replica 0 is the chief, replica i worker i - 1)",
                         newly_gone.empty() ? "" : "; rounds go on without them until they read");
    close(var);
  }
  auto late = [&](Waiter& w) {
    if (now < w.deadline) return false;
    w.reply(error_reply(runtime::unavailable("sync: global step ", w.stamp,
                                             " was not passed in time: no replica's update came")));
    return true;
  };
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), late), waiters_.end());
}

SyncRounds::Clock::time_point SyncRounds::next_deadline() const {
  auto next = Clock::time_point::max();
  for (const auto& [var, acc] : open_) {
    next =
        std::min(next, acc.opened + std::chrono::milliseconds(acc.call.sync.aggregate_timeout_ms));
  }
  for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
  return next;
}

}  // namespace troupe::actors
