// The session's loop driver (actors/session_loop.h): a loop stops at its first failing step and
// says which, ends at the data's end or at once on its stop flag, and reports every step to its
// observers in order, who may stop it or fail it, by answering or by dying, never hanging it.
#include "actors/session.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "harness/op_harness.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {
// A step observer for the tests: records the step numbers it sees and answers as planned.
struct WatchPlan {
  int64_t stop_at = -1;  // ask to stop at this number
  int64_t fail_at = -1;  // answer an error
  int64_t die_at = -1;   // end the actor instead of answering
  bool hold = false;     // keep the acks until a release message
};
struct WatchLog {
  std::mutex mu;
  std::vector<int64_t> numbers;
  int reports = 0;
};
using release_atom = caf::atom_constant<caf::atom("release")>;
struct Held {
  std::vector<std::pair<caf::actor, actors::StepAck>> acks;
};

caf::behavior watcher(caf::stateful_actor<Held>* self, WatchPlan plan,
                      std::shared_ptr<WatchLog> log) {
  return {
      [=](actors::StepReport& r) {
        actors::StepAck ack{r.observer, runtime::ok_status()};
        for (const actors::ReportedStep& step : *r.steps) {
          {
            std::lock_guard<std::mutex> lock(log->mu);
            log->numbers.push_back(step.number);
            log->reports += &step == &r.steps->front();
          }
          if (step.number == plan.die_at) return self->quit(caf::sec::runtime_error);
          ack.stop = ack.stop || step.number == plan.stop_at;
          if (step.number == plan.fail_at)
            ack.status = runtime::data_loss("observer saw a bad step");
        }
        auto session = caf::actor_cast<caf::actor>(self->current_sender());
        if (plan.hold) {
          self->state.acks.push_back({session, ack});
        } else {
          self->send(session, ack);
        }
      },
      [=](release_atom) {
        for (auto& [session, ack] : self->state.acks) self->send(session, ack);
        self->state.acks.clear();
      },
  };
}

struct Doubler {
  runtime::Graph g;
  Output x, y;
};

Doubler doubler() {
  Doubler d;
  runtime::GraphBuilder b(&d.g);
  d.x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  d.y = ops::mul(b, d.x, 2.0);
  REQUIRE(b.ok());
  return d;
}

// Reports each step alone unless given a report interval.
actors::LoopResult run_watched(actors::Runtime& rt, actors::Session& s, const Doubler& d,
                               int64_t steps, std::vector<caf::actor> observers, int64_t window,
                               std::atomic<int>* finished = nullptr,
                               std::chrono::microseconds report_interval = {}) {
  actors::LoopRequest loop;
  loop.steps = steps;
  loop.fetches = {d.y};
  loop.feed = [&d](int64_t i, runtime::FeedList* f) {
    *f = {{d.x, Tensor::scalar<float>(float(i))}};
    return runtime::ok_status();
  };
  loop.on_step = [finished](int64_t, const std::vector<Tensor>&) {
    if (finished) ++*finished;
    return true;
  };
  loop.observers = std::move(observers);
  loop.observer_window = window;
  loop.report_interval = report_interval;
  loop.report_base = 100;
  caf::scoped_actor self{rt.system()};
  actors::LoopResult result{runtime::internal_error("no answer"), 0};
  self->request(s.actor(), caf::infinite, actors::loop_atom::value, std::move(loop))
      .receive([&](actors::LoopResult& r) { result = std::move(r); }, [](caf::error&) {});
  return result;
}
}  // namespace

TEST_CASE("a loop stops at the first failing step and says which") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kInt32, Shape{}, "a");
  Output q = ops::div(b, ops::scalar(b, 10, DType::kInt32), a);
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  actors::LoopRequest loop;
  loop.steps = 100;
  loop.fetches = {q};
  loop.feed = [&](int64_t i, runtime::FeedList* f) {
    *f = {{a, Tensor::scalar<int32_t>(i == 5 ? 0 : 1)}};
    return runtime::ok_status();
  };
  auto done = (*s)->run_loop(loop);
  CHECK_FALSE(done.ok());
  CHECK(done.status().message().find("step 5: Div 'Div': integer division by zero") == 0);
  loop.feed = [&](int64_t i, runtime::FeedList* f) {
    if (i == 3) return runtime::invalid_argument("no more data");
    *f = {{a, Tensor::scalar<int32_t>(1)}};
    return runtime::ok_status();
  };
  done = (*s)->run_loop(loop);
  CHECK(done.status().message() == "feeding step 3: no more data");
  loop.steps = 7;
  loop.feed = [&](int64_t, runtime::FeedList* f) {
    *f = {{a, Tensor::scalar<int32_t>(2)}};
    return runtime::ok_status();
  };
  int seen = 0;
  loop.on_step = [&](int64_t, const std::vector<Tensor>& v) {
    CHECK(v[0].data<int32_t>()[0] == 5);
    return ++seen < 4;  // stop early
  };
  done = (*s)->run_loop(loop);
  REQUIRE(done.ok());
  CHECK(seen == 4);
}

TEST_CASE("a loop's feed ends it at the data's end with OutOfRange; a flag stops it at once") {
  actors::Runtime rt;
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output a = ops::placeholder(b, DType::kInt32, Shape{}, "a");
  Output twice = ops::add(b, a, a);
  auto s = actors::Session::create(rt, g);
  REQUIRE(s.ok());
  actors::LoopRequest loop;
  loop.steps = 100;
  loop.fetches = {twice};
  loop.feed = [&](int64_t i, runtime::FeedList* f) {
    if (i == 6) return runtime::out_of_range("no more data");
    *f = {{a, Tensor::scalar<int32_t>(static_cast<int32_t>(i))}};
    return runtime::ok_status();
  };
  std::vector<int32_t> seen;
  loop.on_step = [&](int64_t, const std::vector<Tensor>& v) {
    seen.push_back(v[0].data<int32_t>()[0]);
    return true;
  };
  bool end = false;
  auto done = (*s)->run_loop(loop, &end);
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(*done == 6);
  CHECK(end);
  CHECK(seen == std::vector<int32_t>{0, 2, 4, 6, 8, 10});

  // The flag, set from another thread while the loop runs, ends it after the steps started.
  auto stop = std::make_shared<std::atomic<bool>>(false);
  loop.steps = INT64_MAX;
  loop.stop = stop;
  loop.feed = [&](int64_t, runtime::FeedList* f) {
    *f = {{a, Tensor::scalar<int32_t>(1)}};
    return runtime::ok_status();
  };
  std::atomic<int64_t> steps{0};
  loop.on_step = [&](int64_t, const std::vector<Tensor>&) {
    ++steps;
    return true;
  };
  std::thread stopper([&] {
    while (steps < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    *stop = true;
  });
  done = (*s)->run_loop(loop, &end);
  stopper.join();
  REQUIRE(done.ok());
  CHECK(*done >= 20);
  CHECK_FALSE(end);
}

TEST_CASE("loop observers see every step in order and answer without a round trip per step") {
  actors::Runtime rt;
  Doubler d = doubler();
  auto s = actors::Session::create(rt, d.g);
  REQUIRE(s.ok());
  auto log_a = std::make_shared<WatchLog>(), log_b = std::make_shared<WatchLog>();
  auto a = rt.system().spawn(watcher, WatchPlan{}, log_a);
  auto b = rt.system().spawn(watcher, WatchPlan{}, log_b);
  auto r = run_watched(rt, **s, d, 10, {a, b}, 2);
  REQUIRE_MESSAGE(r.status.ok(), r.status.to_string());
  CHECK(r.steps_done == 10);
  CHECK_FALSE(r.stop_requested);
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 10; ++i) want.push_back(100 + i);
  CHECK(log_a->numbers == want);  // every report was acknowledged before the loop answered
  CHECK(log_b->numbers == want);
  CHECK(log_a->reports == 10);  // each step finished after the report interval (0)

  // Steps faster than the report interval gather, up to kStepsPerReport a report: every step is
  // still seen once, in order.
  auto log_w = std::make_shared<WatchLog>();
  auto w = rt.system().spawn(watcher, WatchPlan{}, log_w);
  r = run_watched(rt, **s, d, 40, {w}, 2, nullptr, std::chrono::hours(1));
  REQUIRE_MESSAGE(r.status.ok(), r.status.to_string());
  want.clear();
  for (int64_t i = 0; i < 40; ++i) want.push_back(100 + i);
  CHECK(log_w->numbers == want);
  CHECK(log_w->reports >= 40 / actors::LoopRequest::kStepsPerReport);
  CHECK(log_w->reports <= 20);

  // An observer that holds its answers holds the loop to its window, then lets it finish.
  auto log_h = std::make_shared<WatchLog>();
  auto held = rt.system().spawn(watcher, WatchPlan{.hold = true}, log_h);
  std::atomic<int> finished{0};
  actors::LoopResult held_result;
  std::thread loop([&] { held_result = run_watched(rt, **s, d, 30, {held}, 3, &finished); });
  for (int i = 0; i < 5000 && finished < 3; ++i) {  // however loaded the machine is
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(finished >= 3);
  CHECK(finished <= 3 + 2);  // the window, plus the steps already in flight
  while (finished < 30) {
    caf::anon_send(held, release_atom::value);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  caf::anon_send(held, release_atom::value);
  loop.join();
  REQUIRE(held_result.status.ok());
  CHECK(held_result.steps_done == 30);
  caf::anon_send_exit(held, caf::exit_reason::user_shutdown);
}

TEST_CASE("a loop observer stops the loop, fails it, or fails it by dying; never a hang") {
  actors::Runtime rt;
  Doubler d = doubler();
  auto s = actors::Session::create(rt, d.g);
  REQUIRE(s.ok());
  auto log = std::make_shared<WatchLog>();
  auto stopper = rt.system().spawn(watcher, WatchPlan{.stop_at = 105}, log);
  auto r = run_watched(rt, **s, d, 100, {stopper}, 2);
  REQUIRE(r.status.ok());
  CHECK(r.stop_requested);
  CHECK(r.steps_done >= 6);
  CHECK(r.steps_done <= 6 + 2);
  CHECK(log->numbers.size() == static_cast<size_t>(r.steps_done));  // the late steps too

  auto failer = rt.system().spawn(watcher, WatchPlan{.fail_at = 103}, log);
  r = run_watched(rt, **s, d, 100, {failer}, 2);
  CHECK(r.status.code() == runtime::Code::kDataLoss);
  CHECK(r.status.message() == "observer saw a bad step");

  auto dying = rt.system().spawn(watcher, WatchPlan{.die_at = 104}, log);
  r = run_watched(rt, **s, d, 100, {dying}, 2);
  CHECK(r.status.code() == runtime::Code::kUnavailable);
  CHECK(r.status.message().find("step observer 0 stopped during the loop") == 0);

  // The session is fine afterwards.
  auto fine = rt.system().spawn(watcher, WatchPlan{}, log);
  r = run_watched(rt, **s, d, 5, {fine}, 2);
  CHECK(r.status.ok());
  CHECK(r.steps_done == 5);
  for (auto& a : {stopper, failer, fine}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}
