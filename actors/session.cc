#include "actors/session.h"

#include <atomic>

#include "actors/device_actor.h"
#include "actors/net/data_channel.h"
#include "actors/net/data_server.h"
#include "actors/parameter_shard.h"
#include "actors/server.h"
#include "actors/session_actor.h"
#include "runtime/cpu_relax.h"
#include "runtime/log.h"
#include "runtime/placement.h"

namespace troupe::actors {

namespace {

// Threads spinning in await_answer now.
std::atomic<int> spinners{0};

// Waits for a message in `self`'s mailbox, polling for up to `limit` first when no other caller
// polls: a blocked caller is woken by a futex call and a parked CPU, 10-20 us here, which on a
// one-off step of a small model is as long as the step. One caller at a time, so that polling
// callers never crowd the worker that runs their steps off the cores.
void await_answer(caf::blocking_actor* self, std::chrono::nanoseconds limit) {
  if (limit.count() <= 0 || !self->mailbox().empty()) return;
  if (spinners.fetch_add(1) == 0) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (self->mailbox().empty() && std::chrono::steady_clock::now() < until) {
      runtime::poll_round(64);
    }
  }
  spinners.fetch_sub(1);
}

// Where the server's data channel listens; 0 when it has none.
uint16_t data_port_of(Runtime& rt, const caf::actor& server) {
  uint16_t port = 0;
  caf::scoped_actor self{rt.system()};
  self->request(server, std::chrono::seconds(5), net::data_port_atom::value)
      .receive([&](uint16_t p) { port = p; }, [](caf::error&) {});
  return port;
}

}  // namespace

runtime::Result<std::unique_ptr<Session>> Session::create(Runtime& rt, const runtime::Graph& graph,
                                                          SessionOptions options) {
  std::unique_ptr<Session> s(new Session(rt));
  auto placed = std::make_shared<runtime::Graph>(graph);
  // Variables placed by hand gather their rows where they live, as placed ones do.
  if (!options.cluster.empty()) runtime::colocate_gathers(placed.get());
  s->graph_ = std::move(placed);
  s->variables_ =
      options.variables ? options.variables : std::make_shared<runtime::VariableStore>();
  Device device = spawn_device(rt.system(), {options.memory_limit_bytes});
  s->device_ = device.actor;
  s->allocator_ = device.allocator;
  s->shard_ =
      spawn_parameter_shard(rt.system(), std::make_shared<ShardCalls>(s->variables_), uint16_t{0});

  SessionSpec spec;
  spec.graph = s->graph_;
  spec.pipeline_depth = options.pipeline_depth;
  spec.allocator = s->allocator_;
  spec.variables = s->variables_;
  // An update's reply waits at the ps for its round, up to sync_timeout, before it travels.
  const bool sync = options.replicas_to_aggregate > 0;
  const std::chrono::milliseconds call_timeout =
      options.remote_timeout + (sync ? options.sync_timeout : std::chrono::milliseconds(0)) +
      (sync && options.min_replicas > 0 ? options.join_timeout : std::chrono::milliseconds(0));
  spec.remote_timeout = caf::duration(call_timeout);
  spec.profiler = std::make_shared<StepProfiler>();
  spec.fuse_ops = options.fuse_ops;
  if (options.replica >= 0) {
    spec.sync =
        SyncTag{options.replica, static_cast<uint32_t>(std::max(0, options.replicas_to_aggregate)),
                static_cast<uint32_t>(options.sync_timeout.count()),
                static_cast<uint32_t>(std::max(0, options.min_replicas)), !sync};
    // A synchronous replica's next step reads what the round it took part in wrote, and its
    // updates carry the global step their step read (sync_stamp.h).
    if (sync) {
      spec.pipeline_depth = 1;
      spec.stamp = std::make_shared<SyncStamp>();
    }
  }
  for (const auto& [task, address] : options.cluster) {
    auto parsed = runtime::DeviceSpec::parse(task);
    if (!parsed.ok() || parsed->job.empty()) {
      return runtime::invalid_argument("cluster task '", task, "' is not /job:NAME/task:N");
    }
    const std::string key = runtime::task_of(task);
    TROUPE_ASSIGN_OR_RETURN(caf::actor server, connect_server(rt, address, key));
    spec.remote_tasks[key] = server;
    // Tensors go over the server's data channel when it has one; CAF's connection otherwise.
    const uint16_t data_port = data_port_of(rt, server);
    for (int i = 0; data_port != 0 && i < Session::kDataChannelsPerServer; ++i) {
      auto channel = net::DataChannel::connect(rt, address.substr(0, address.rfind(':')), data_port,
                                               call_timeout, key);
      if (!channel.ok()) {
        // Slower, still correct; a wrong --advertise-data-port or a closed port shows here.
        runtime::log_warning("no data channel to ", key, " (", channel.status().message(),
                             "): its tensors travel over CAF's connection");
        break;
      }
      spec.remote_channels[key].push_back(*channel);
      s->channels_.push_back(*channel);
    }
  }
  s->session_ = spawn_session(rt.system(), std::move(spec));
  return s;
}

Session::Traffic Session::traffic() const {
  Traffic sum;
  for (const auto& c : channels_) {
    const net::DataChannel::Traffic t = c->traffic();
    sum.calls += t.calls;
    sum.bytes_sent += t.bytes_sent;
    sum.bytes_received += t.bytes_received;
  }
  return sum;
}

Session::~Session() {
  callers_.clear();
  for (caf::actor* a : {&session_, &shard_, &device_}) {
    caf::anon_send_exit(*a, caf::exit_reason::user_shutdown);
    *a = nullptr;
  }
}

std::unique_ptr<caf::scoped_actor> Session::borrow_caller() {
  {
    std::lock_guard<std::mutex> lock(callers_mu_);
    if (!callers_.empty()) {
      std::unique_ptr<caf::scoped_actor> caller = std::move(callers_.back());
      callers_.pop_back();
      return caller;
    }
  }
  return std::make_unique<caf::scoped_actor>(runtime_.system());
}

void Session::give_back(std::unique_ptr<caf::scoped_actor> caller) {
  std::lock_guard<std::mutex> lock(callers_mu_);
  callers_.push_back(std::move(caller));
}

runtime::Result<std::vector<runtime::Tensor>> Session::run(
    const runtime::FeedList& feeds, const std::vector<runtime::Output>& fetches,
    const std::vector<int>& targets) {
  std::unique_ptr<caf::scoped_actor> caller = borrow_caller();
  caf::scoped_actor& self = *caller;
  RunResult result{runtime::internal_error("no answer from the session"), {}};
  const auto start = std::chrono::steady_clock::now();
  auto answer =
      self->request(session_, caf::infinite, run_atom::value, RunRequest{feeds, fetches, targets});
  // Poll only while steps answer within the poll: a longer one would spend a core on waiting
  // that its kernels' threads could use.
  const bool poll = std::chrono::nanoseconds(last_answer_ns_.load()) <= kAnswerPoll;
  await_answer(self.ptr(), poll ? kAnswerPoll : std::chrono::nanoseconds(0));
  answer.receive([&](RunResult& r) { result = std::move(r); },
                 [&](caf::error& e) {
                   result.status =
                       runtime::internal_error("session: ", runtime_.system().render(e));
                 });
  last_answer_ns_ = std::chrono::nanoseconds(std::chrono::steady_clock::now() - start).count();
  give_back(std::move(caller));
  if (!result.status.ok()) return result.status;
  return std::move(result.values);
}

runtime::Result<int64_t> Session::run_loop(LoopRequest loop, bool* end_of_input) {
  std::unique_ptr<caf::scoped_actor> caller = borrow_caller();
  caf::scoped_actor& self = *caller;
  LoopResult result{runtime::internal_error("no answer from the session"), 0};
  self->request(session_, caf::infinite, loop_atom::value, std::move(loop))
      .receive([&](LoopResult& r) { result = std::move(r); },
               [&](caf::error& e) {
                 result.status = runtime::internal_error("session: ", runtime_.system().render(e));
               });
  give_back(std::move(caller));
  if (end_of_input) *end_of_input = result.end_of_input;
  if (!result.status.ok()) return result.status;
  return result.steps_done;
}

}  // namespace troupe::actors
