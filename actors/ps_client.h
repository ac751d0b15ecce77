// PsClient: what the chief and the workers of a cluster ask of its parameter servers besides
// the graph's own shard calls: that they are up (waiting for them, with a log line naming whom
// it waits for), which variables they hold, their state for a checkpoint, and a state for them.
//
//   auto ps = PsClient::connect(rt, {{"/job:ps/task:0", "10.0.0.5:2222"}}, {.deadline = 60s});
//   TROUPE_RETURN_IF_ERROR((*ps)->wait_for_variables(where, wait));  // the chief initialised them
//   (*ps)->pull(&store);          // every task's variables and slots, into a local store
//   (*ps)->push(store, where);    // each task its variables and their slots
//
// `where` maps a variable to its task (runtime/placement.h); a slot ("<var>/<slot>") goes with
// its variable. Calls block the calling thread: never call from an actor on CAF's workers.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/runtime_system.h"
#include "runtime/status.h"
#include "runtime/variable_store.h"

namespace troupe::actors {

struct WaitOptions {
  std::chrono::milliseconds poll{200};
  std::chrono::milliseconds deadline{60000};
  std::chrono::milliseconds log_every{5000};  // a line naming whom it still waits for
  // Set (a graceful stop from a signal, say): the wait ends at its next poll, Cancelled.
  const std::atomic<bool>* stop = nullptr;
};

// Connects to "host:port", retrying until the deadline: members of a cluster start in any order.
runtime::Result<caf::actor> wait_for_server(Runtime& runtime, const std::string& task,
                                            const std::string& address, const WaitOptions& wait);

class PsClient {
 public:
  using Placement = std::map<std::string, std::string>;  // variable -> task

  // Waits for every task's server to answer; an error naming the tasks still missing at the
  // deadline.
  static runtime::Result<std::unique_ptr<PsClient>> connect(
      Runtime& runtime, std::map<std::string, std::string> tasks, const WaitOptions& wait);

  // The placed variables their tasks do not hold yet.
  runtime::Result<std::vector<std::string>> missing(const Placement& where);
  // Until every placed variable is held (the chief has initialised or restored them).
  runtime::Status wait_for_variables(const Placement& where, const WaitOptions& wait);
  // Every task's entries (variables and slots) into `into`.
  runtime::Status pull(runtime::VariableStore* into);
  // Each task the placed variables of `from` and their slots, in one message per task.
  runtime::Status push(const runtime::VariableStore& from, const Placement& where);
  // One int64 scalar (the global step) from the task that holds it.
  runtime::Result<int64_t> read_int64(const std::string& variable, const std::string& task);
  // The training replicas the task sees calling it now (ShardCalls::live_replicas), in order.
  runtime::Result<std::vector<int>> live_replicas(const std::string& task);
  // Tells every task that training is over (the chief's last word): their servers end.
  runtime::Status finish();

 private:
  explicit PsClient(Runtime& runtime) : runtime_(runtime) {}
  runtime::Result<caf::actor> server(const std::string& task) const;
  template <class Reply, class... Ts>
  runtime::Result<Reply> ask(const std::string& task, std::chrono::milliseconds timeout,
                             Ts&&... xs);
  Runtime& runtime_;
  std::map<std::string, std::string> addresses_;
  std::map<std::string, caf::actor> servers_;
  // A reply that does not come means a server that died with the request in flight (CAF fails
  // no pending request when a connection drops): small questions give up soon, state transfers
  // (a model's worth of bytes) later.
  std::chrono::milliseconds question_timeout_{5000};
  std::chrono::milliseconds transfer_timeout_{60000};
};

}  // namespace troupe::actors
