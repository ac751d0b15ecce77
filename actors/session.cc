#include "actors/session.h"

#include "actors/device_actor.h"
#include "actors/parameter_shard.h"
#include "actors/server.h"
#include "actors/session_actor.h"

namespace troupe::actors {

runtime::Result<std::unique_ptr<Session>> Session::create(Runtime& rt, const runtime::Graph& graph,
                                                          SessionOptions options) {
  std::unique_ptr<Session> s(new Session(rt));
  s->graph_ = std::make_shared<const runtime::Graph>(graph);
  s->variables_ =
      options.variables ? options.variables : std::make_shared<runtime::VariableStore>();
  Device device = spawn_device(rt.system(), {options.memory_limit_bytes});
  s->device_ = device.actor;
  s->allocator_ = device.allocator;
  s->shard_ = rt.system().spawn(parameter_shard, s->variables_);

  SessionSpec spec;
  spec.graph = s->graph_;
  spec.pipeline_depth = options.pipeline_depth;
  spec.allocator = s->allocator_;
  spec.variables = s->variables_;
  spec.remote_timeout = caf::duration(options.remote_timeout);
  spec.profiler = std::make_shared<StepProfiler>();
  for (const auto& [task, address] : options.cluster) {
    auto parsed = runtime::DeviceSpec::parse(task);
    if (!parsed.ok() || parsed->job.empty()) {
      return runtime::invalid_argument("cluster task '", task, "' is not /job:NAME/task:N");
    }
    TROUPE_ASSIGN_OR_RETURN(caf::actor server, connect_server(rt, address));
    std::string key = "/job:" + parsed->job + "/task:" + std::to_string(std::max(0, parsed->task));
    spec.remote_tasks[key] = server;
  }
  s->session_ = spawn_session(rt.system(), std::move(spec));
  return s;
}

Session::~Session() {
  for (caf::actor* a : {&session_, &shard_, &device_}) {
    caf::anon_send_exit(*a, caf::exit_reason::user_shutdown);
    *a = nullptr;
  }
}

runtime::Result<std::vector<runtime::Tensor>> Session::run(
    const runtime::FeedList& feeds, const std::vector<runtime::Output>& fetches,
    const std::vector<int>& targets) {
  caf::scoped_actor self{runtime_.system()};
  RunResult result{runtime::internal_error("no answer from the session"), {}};
  self->request(session_, caf::infinite, run_atom::value, RunRequest{feeds, fetches, targets})
      .receive([&](RunResult& r) { result = std::move(r); },
               [&](caf::error& e) {
                 result.status = runtime::internal_error("session: ", runtime_.system().render(e));
               });
  if (!result.status.ok()) return result.status;
  return std::move(result.values);
}

runtime::Result<int64_t> Session::run_loop(LoopRequest loop, bool* end_of_input) {
  caf::scoped_actor self{runtime_.system()};
  LoopResult result{runtime::internal_error("no answer from the session"), 0};
  self->request(session_, caf::infinite, loop_atom::value, std::move(loop))
      .receive([&](LoopResult& r) { result = std::move(r); },
               [&](caf::error& e) {
                 result.status = runtime::internal_error("session: ", runtime_.system().render(e));
               });
  if (end_of_input) *end_of_input = result.end_of_input;
  if (!result.status.ok()) return result.status;
  return result.steps_done;
}

}  // namespace troupe::actors
