#include "actors/runtime_system.h"

#include <caf/io/all.hpp>

#include "actors/graph_core.h"
#include "actors/member_middleman.h"
#include "actors/net/data_channel.h"
#include "actors/scheduler.h"

namespace troupe::actors {

Runtime::Runtime(RuntimeOptions options) : config_(std::make_unique<caf::actor_system_config>()) {
  caf::actor_system_config& cfg = *config_;
  if (!options.caf_scheduler_defaults) {
    if (options.caf_worker_loop) {
      cfg.set("scheduler.policy", caf::atom("stealing"));
    } else {
      install_quiet_scheduler(cfg, options.idle_spin);
    }
    cfg.set("scheduler.max-threads", options.worker_threads);
    cfg.set("work-stealing.aggressive-poll-attempts", size_t{1});
    cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
    cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(10)});
  }
  cfg.set("middleman.heartbeat-interval", caf::timespan{options.heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{options.connection_timeout});
  cfg.set("logger.console", caf::atom("none"));
  cfg.add_thread_hook<GraphCoreHook>();
  cfg.load<caf::io::middleman>();
  const int workers_before = workers_registered();
  system_ = std::make_unique<caf::actor_system>(cfg);
  if (!options.caf_scheduler_defaults && !options.caf_worker_loop) {
    await_workers(workers_before + static_cast<int>(options.worker_threads),
                  std::chrono::seconds(2));
  }
  self_.task = options.task;
  self_.members = options.members;
  dial_book_ = std::make_shared<DialBook>();
  if (options.secret) {
    secret_ = options.secret;
    member_middleman_ =
        spawn_member_middleman(*system_, secret_, self_, dial_book_, options.handshake_timeout);
  }
}

runtime::Result<uint16_t> Runtime::publish(const caf::actor& whom, uint16_t port,
                                           const std::string& host) {
  if (!member_middleman_) {
    auto p = system_->middleman().publish(whom, port, host.c_str(), /*reuse_addr=*/true);
    if (!p) return runtime::unavailable(system_->render(p.error()));
    return *p;
  }
  runtime::Result<uint16_t> out = runtime::unavailable("no answer from the middleman");
  caf::scoped_actor self{*system_};
  self->request(member_middleman_, caf::infinite, caf::publish_atom::value, port,
                caf::actor_cast<caf::strong_actor_ptr>(whom), system_->message_types(whom), host,
                true)
      .receive([&](uint16_t p) { out = p; },
               [&](caf::error& e) { out = runtime::unavailable(system_->render(e)); });
  return out;
}

void Runtime::unpublish(const caf::actor& whom, uint16_t port) {
  if (!member_middleman_) {
    system_->middleman().unpublish(whom, port);
    return;
  }
  caf::scoped_actor self{*system_};
  self->request(member_middleman_, std::chrono::seconds(10), caf::unpublish_atom::value,
                whom.address(), port)
      .receive([] {}, [](caf::error&) {});
}

Introduction Runtime::introduction(const std::string& task) const {
  Introduction me = self_;
  me.dialled = task;
  return me;
}

runtime::Result<caf::actor> Runtime::remote_actor(const std::string& host, uint16_t port,
                                                  const std::string& task) {
  dial_book_->expect(host, port, task);
  if (!member_middleman_) {
    auto a = system_->middleman().remote_actor(host, port);
    if (!a) return runtime::unavailable(system_->render(a.error()));
    return *a;
  }
  runtime::Result<caf::actor> out = runtime::unavailable("no answer from the middleman");
  caf::scoped_actor self{*system_};
  self->request(member_middleman_, caf::infinite, caf::connect_atom::value, host, port)
      .receive(
          [&](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) {
            if (ptr) {
              out = caf::actor_cast<caf::actor>(std::move(ptr));
            } else {
              out = runtime::unavailable("no actor published at ", host, ":", port);
            }
          },
          [&](caf::error& e) { out = runtime::unavailable(system_->render(e)); });
  return out;
}

Runtime::~Runtime() {
  if (member_middleman_) caf::anon_send_exit(member_middleman_, caf::exit_reason::user_shutdown);
  member_middleman_ = nullptr;
  system_->await_all_actors_done();
  system_.reset();
}

size_t Runtime::running_actors() const { return system_->registry().running(); }

runtime::Result<std::shared_ptr<net::ChannelPoller>> Runtime::channel_poller() {
  std::lock_guard<std::mutex> lock(poller_mu_);
  if (!poller_) {
    TROUPE_ASSIGN_OR_RETURN(poller_, net::ChannelPoller::start());
  }
  return poller_;
}

}  // namespace troupe::actors
