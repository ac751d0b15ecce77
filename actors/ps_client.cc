#include "actors/ps_client.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include "actors/parameter_shard.h"
#include "actors/server.h"
#include "runtime/checkpoint.h"
#include "runtime/log.h"

namespace troupe::actors {

using runtime::Result;
using runtime::Status;
using Clock = std::chrono::steady_clock;

namespace {

bool stopped(const WaitOptions& wait) { return wait.stop != nullptr && wait.stop->load(); }

}  // namespace

Result<caf::actor> wait_for_server(Runtime& rt, const std::string& task, const std::string& address,
                                   const WaitOptions& wait) {
  const auto start = Clock::now();
  auto last_log = start;
  // Back-off from the poll interval up to a second: a peer still starting is found quickly, a
  // name not yet in DNS is not asked many times a second.
  auto pause = wait.poll;
  const auto longest = std::max(wait.poll, std::chrono::milliseconds(1000));
  for (;;) {
    Result<caf::actor> server = connect_server(rt, address, task);
    if (server.ok() || server.status().code() == runtime::Code::kInvalidArgument) return server;
    if (stopped(wait)) {
      return runtime::make_error(runtime::Code::kCancelled, "stopped while waiting for ", task,
                                 " at ", address);
    }
    const auto now = Clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    if (waited >= wait.deadline) {
      return runtime::make_error(runtime::Code::kUnavailable, task, " at ", address,
                                 " did not come up within ", wait.deadline.count(),
                                 " ms; the last try: ", server.status().message());
    }
    if (now - last_log >= wait.log_every) {
      runtime::log_info("waiting for ", task, " at ", address, " (", waited.count() / 1000,
                        " s): ", server.status().message());
      last_log = now;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(longest, pause * 2);
  }
}

Result<std::unique_ptr<PsClient>> PsClient::connect(Runtime& rt,
                                                    std::map<std::string, std::string> tasks,
                                                    const WaitOptions& wait) {
  std::unique_ptr<PsClient> c(new PsClient(rt));
  c->addresses_ = std::move(tasks);
  for (const auto& [task, address] : c->addresses_) {
    const auto start = Clock::now();
    for (;;) {
      TROUPE_ASSIGN_OR_RETURN(c->servers_[task], wait_for_server(rt, task, address, wait));
      // CAF's middleman hands back the proxy of the server it last reached at an address until
      // it has heard that connection drop: a member reconnecting at once, because its steps
      // failed on that drop, got the dead server, and its restart failed on the first question
      // (tools_cluster_test, "a ps killed and started again"). A server that answers is live.
      auto alive = c->ask<std::vector<std::string>>(
          task, std::min(c->question_timeout_, wait.deadline), varnames_atom::value);
      if (alive.ok()) break;
      if (Clock::now() - start >= wait.deadline || stopped(wait)) return alive.status();
      std::this_thread::sleep_for(wait.poll);
    }
  }
  return c;
}

Result<caf::actor> PsClient::server(const std::string& task) const {
  auto it = servers_.find(task);
  if (it == servers_.end())
    return runtime::invalid_argument("no ps task ", task, " in the cluster");
  return it->second;
}

namespace {

// The variable a store entry belongs to: itself, or the longest placed name it is a slot of.
const std::string* owner(const std::string& entry, const PsClient::Placement& where) {
  auto it = where.find(entry);
  if (it != where.end()) return &it->first;
  const std::string* best = nullptr;
  for (const auto& [var, task] : where) {
    if (entry.size() > var.size() + 1 && entry.compare(0, var.size(), var) == 0 &&
        entry[var.size()] == '/' && (best == nullptr || var.size() > best->size())) {
      best = &var;
    }
  }
  return best;
}

}  // namespace

Result<std::vector<std::string>> PsClient::missing(const Placement& where) {
  std::vector<std::string> out;
  for (const auto& [task, server] : servers_) {
    TROUPE_ASSIGN_OR_RETURN(
        std::vector<std::string> held,
        ask<std::vector<std::string>>(task, question_timeout_, varnames_atom::value));
    std::sort(held.begin(), held.end());
    for (const auto& [var, t] : where) {
      if (t == task && !std::binary_search(held.begin(), held.end(), var)) out.push_back(var);
    }
  }
  return out;
}

Status PsClient::wait_for_variables(const Placement& where, const WaitOptions& wait) {
  const auto start = Clock::now();
  auto last_log = start;
  for (;;) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<std::string> absent, missing(where));
    if (absent.empty()) return runtime::ok_status();
    if (stopped(wait)) {
      return runtime::make_error(runtime::Code::kCancelled,
                                 "stopped while waiting for the chief to initialise ",
                                 absent.size(), " variables");
    }
    const auto now = Clock::now();
    if (now - start >= wait.deadline) {
      return runtime::make_error(runtime::Code::kUnavailable, "the chief did not initialise ",
                                 absent.size(), " variables (", absent.front(), " on ",
                                 where.at(absent.front()), ") within ", wait.deadline.count(),
                                 " ms");
    }
    if (now - last_log >= wait.log_every) {
      runtime::log_info("waiting for the chief to initialise ", absent.size(), " variables (",
                        absent.front(), " on ", where.at(absent.front()), ")");
      last_log = now;
    }
    std::this_thread::sleep_for(wait.poll);
  }
}

Status PsClient::pull(runtime::VariableStore* into) {
  for (const auto& [task, server] : servers_) {
    TROUPE_ASSIGN_OR_RETURN(std::vector<char> file,
                            ask<std::vector<char>>(task, transfer_timeout_, snapshot_atom::value,
                                                   std::vector<std::string>{}));
    TROUPE_ASSIGN_OR_RETURN(
        runtime::CheckpointData data,
        runtime::parse_checkpoint(std::string_view(file.data(), file.size()), task));
    runtime::load_into(data, into);
  }
  return runtime::ok_status();
}

Status PsClient::push(const runtime::VariableStore& from, const Placement& where) {
  std::map<std::string, runtime::CheckpointData> per_task;
  for (const std::string& entry : from.names()) {
    const std::string* var = owner(entry, where);
    if (var == nullptr) continue;  // not the training graph's (a metric's, say): stays here
    TROUPE_ASSIGN_OR_RETURN(per_task[where.at(*var)].tensors[entry], from.read(entry));
  }
  for (const auto& [task, data] : per_task) {
    TROUPE_ASSIGN_OR_RETURN(std::string file, runtime::encode_checkpoint(data));
    TROUPE_ASSIGN_OR_RETURN(std::string error,
                            ask<std::string>(task, transfer_timeout_, load_atom::value,
                                             std::vector<char>(file.begin(), file.end())));
    if (!error.empty()) return runtime::internal_error(task, " refused the state: ", error);
  }
  return runtime::ok_status();
}

Status PsClient::finish() {
  Status all = runtime::ok_status();
  for (const auto& [task, server] : servers_) {
    Result<bool> told = ask<bool>(task, question_timeout_, finished_atom::value);
    if (!told.ok() && all.ok()) all = told.status();
  }
  return all;
}

Result<int64_t> PsClient::read_int64(const std::string& variable, const std::string& task) {
  TROUPE_ASSIGN_OR_RETURN(std::vector<char> file,
                          ask<std::vector<char>>(task, question_timeout_, snapshot_atom::value,
                                                 std::vector<std::string>{variable}));
  TROUPE_ASSIGN_OR_RETURN(
      runtime::CheckpointData data,
      runtime::parse_checkpoint(std::string_view(file.data(), file.size()), task));
  auto it = data.tensors.find(variable);
  if (it == data.tensors.end() || it->second.dtype() != runtime::DType::kInt64 ||
      it->second.num_elements() != 1) {
    return runtime::internal_error(task, ": '", variable, "' is not an int64 scalar");
  }
  return it->second.data<int64_t>()[0];
}

Result<std::vector<int>> PsClient::live_replicas(const std::string& task) {
  TROUPE_ASSIGN_OR_RETURN(
      std::vector<std::string> names,
      ask<std::vector<std::string>>(task, question_timeout_, members_atom::value));
  std::vector<int> replicas;
  for (const std::string& name : names) {
    int r = -1;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), r);
    if (error != std::errc() || end != name.data() + name.size() || r < 0) {
      return runtime::data_loss(task, " named replica '", name, "', not a number");
    }
    replicas.push_back(r);
  }
  return replicas;
}

// The answer, or an error as soon as the server goes: CAF fails no request in flight when a
// connection drops, so the server is watched while its answer is awaited.
template <class Reply, class... Ts>
Result<Reply> PsClient::ask(const std::string& task, std::chrono::milliseconds timeout,
                            Ts&&... xs) {
  TROUPE_ASSIGN_OR_RETURN(caf::actor s, server(task));
  caf::scoped_actor self{runtime_.system()};
  self->monitor(s);
  self->send(s, std::forward<Ts>(xs)...);
  const std::string who = task + " (" + addresses_.at(task) + ")";
  Result<Reply> out = runtime::unavailable(who, " did not answer in ", timeout.count(), " ms");
  self->receive(
      [&](Reply& r) { out = std::move(r); },
      [&](caf::down_msg& d) {
        out = runtime::unavailable(who, " has gone: ", runtime_.system().render(d.reason));
      },
      [&](caf::error& e) { out = runtime::unavailable(who, ": ", runtime_.system().render(e)); },
      caf::after(timeout) >> [] {});
  self->demonitor(s);
  return out;
}

}  // namespace troupe::actors
