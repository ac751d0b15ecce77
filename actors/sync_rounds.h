// SyncRounds: a parameter shard's part in synchronous training, as TF's SyncReplicasOptimizer
// with its conditional accumulators and token queue. Each update of a variable from a replica
// (an optimizer's Apply*, the global step's AssignAdd) is accumulated instead of applied; once
// `aggregate` replicas have sent theirs, the mean of their inputs is applied once and the
// variable's round advances. A round is a global step's: each update carries the global step its
// replica read in the same step (SyncTag::stamp, TF's local step), on every shard alike, so that
// a round waits only for replicas of its own step; rounds counted by each variable apart let a
// replica's updates of one step fall in rounds of different steps on different shards, and 64
// workers aggregating 60 met two rounds each waiting for replicas the other held. An update
// stamped with a step whose round has closed (a straggler, a backup worker) is dropped; one
// stamped later than the open round closes it with what it has (the global step has passed it:
// another shard counted a replica gone sooner). Updates without a stamp (a step that reads no
// global step) go by the replica's reads of the variable: one that read it before the last round
// closed is dropped. A round still short of replicas after its timeout closes with those it has,
// logged with who took part; the replicas it missed count as gone (a killed worker) and the rounds
// after it need only the others, until a gone replica reads a variable again: one timeout
// for a lost worker, not one a step. A replica whose connections all closed (a killed or
// stopped worker: ShardCalls tells `leave`) is gone at once, and the open rounds that counted
// on it close with those they have, if that is enough: no round waits for a worker that is
// gone. How many replicas a round waits for is fixed when it opens: `aggregate`, less the
// gone; with elastic rounds (SyncTag::min_aggregate, --min-replicas) the live replicas (those
// that called and are not gone), between min_aggregate and `aggregate`: a replica that joins
// counts from the next round on. A round short of min_aggregate at its timeout waits on for
// replicas to join (logged), as Horovod Elastic waits below min-np. An update is answered when its
// round closes, with the round's result, so that a replica whose updates have all been answered
// reads what its round wrote (TF's token queue, without a call of its own). The barrier (op
// SyncReplicasBarrier, on the ps of the global step) answers a replica once the global step has
// passed the one it read, for a step that must wait for the round without an update there.
//
//   SyncRounds sync(read, apply);   // read: a variable's value; apply: runs a round's mean update
//   sync.note_read(replica, "w");                    // a read of w (Variable, VariableGather)
//   // call.sync.stamp: the global step the replica read in this step (-1: none)
//   std::optional<Reply> r = sync.contribute(std::move(call), later, Clock::now());  // or later
//   std::optional<Reply> r = sync.wait(barrier_call, later, Clock::now());  // or later(reply)
//   sync.expire(Clock::now());                       // at next_deadline()
//   sync.leave(3);                                   // replica 3's connections all closed
//   sync.restart();                                  // a model was loaded: rounds start over
//
// Not thread-safe: ShardCalls owns it and calls it under its lock (parameter_shard.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/shard_codec.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::actors {

class SyncRounds {
 public:
  using Clock = std::chrono::steady_clock;
  using Reply = ShardReply;
  // A variable's value, as the store holds it between updates.
  using Read = std::function<runtime::Result<runtime::Tensor>(const std::string& var)>;
  // Runs a closed round's update, the mean of its replicas' inputs, against the store.
  using Apply = std::function<Reply(ShardCall)>;

  SyncRounds(Read read, Apply apply) : read_(std::move(read)), apply_(std::move(apply)) {}

  void note_read(int replica, const std::string& var);
  // The replica is gone (its connections closed): the open rounds it has not contributed to
  // need one fewer, and those with enough close now. It is back at its next read.
  void leave(int replica);
  // The replicas that called and are not gone, in order.
  std::vector<int> live() const;
  // Whether rounds count the replica out (it left, or missed a round at its timeout).
  bool gone(int replica) const { return gone_.count(replica) > 0; }
  // The replicas a round opening with `live` replicas waits for, by its tag: `aggregate`, or the
  // live ones when fewer and some are gone (`any_gone`); elastic, the live ones between
  // min_aggregate and `aggregate`. At least one. The chief's log counts with it too.
  static size_t round_size(const SyncTag& tag, size_t live, bool any_gone);
  // The reply once the update's round has closed: now when this call closed it or was dropped
  // (the variable as it is), else nothing, and `later` gets it when the round closes (the
  // others' updates came, or its time is up). A replica whose update has been answered reads
  // the round's result: it needs no barrier after its updates. An update whose inputs differ
  // in number, dtype or shape from the round's first is answered now with an error, uncounted.
  std::optional<Reply> contribute(ShardCall call, const std::function<void(Reply)>& later,
                                  Clock::time_point now);
  // The barrier: the reply now when the global step has passed the call's input; else nothing,
  // and `later` gets it once the step passes or the wait's time is up.
  std::optional<Reply> wait(const ShardCall& call, const std::function<void(Reply)>& later,
                            Clock::time_point now);
  // A model was loaded into the store (the chief restored every ps from its checkpoint after
  // one restarted): rounds start over from the global step it holds, which may be behind the
  // rounds closed here. The open rounds' updates, from the model before, are dropped, each
  // answered with its variable as loaded.
  void restart();
  // Closes rounds and fails waits past their time.
  void expire(Clock::time_point now);
  Clock::time_point next_deadline() const;

  int64_t round(const std::string& var) const;
  int64_t dropped() const { return dropped_; }

 private:
  struct Accumulator {
    ShardCall call;     // the first contribution, its inputs replaced by their running sum
    bool mean = false;  // the sum divided by its count already
    std::set<int> replicas;
    size_t target = 1;  // the contributions that close it, fixed when it opens (needed())
    Clock::time_point opened;
    // The contributions answered when the round closes, and whether each wants the value.
    std::vector<std::pair<std::function<void(Reply)>, bool>> waiting;
    int64_t stamp = -1;  // the global step its updates read (SyncTag::stamp); -1: unstamped
  };
  struct Waiter {
    int64_t stamp = 0;
    std::function<void(Reply)> reply;
    Clock::time_point deadline;
  };
  runtime::Status add(Accumulator& acc, const ShardCall& call);
  Reply close(const std::string& var);
  void release();
  Reply current_value(const std::string& var) const;

  std::optional<int64_t> global_step() const;

  Read read_;
  Apply apply_;
  std::map<std::string, int64_t> rounds_;
  std::map<std::pair<int, std::string>, int64_t> read_round_;
  std::map<std::string, Accumulator> open_;
  std::map<std::string, int64_t> closed_stamp_;  // a variable's last round closed, by its stamp
  std::vector<Waiter> waiters_;
  // round_size() with this shard's live replicas.
  size_t needed(const SyncTag& tag) const;
  static size_t floor(const SyncTag& tag) { return std::max<size_t>(1, tag.min_aggregate); }

  std::set<int> seen_;  // replicas that have called, for naming those a round misses
  std::set<int> gone_;  // missed a round at its timeout and not heard from since
  int64_t dropped_ = 0;
};

}  // namespace troupe::actors
