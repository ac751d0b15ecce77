#include "actors/session_loop.h"

#include <algorithm>
#include <deque>
#include <string>

#include "actors/net/data_channel.h"
#include "actors/queue.h"
#include "actors/session_state.h"

namespace troupe::actors::session {

using runtime::Status;
using runtime::Tensor;

namespace {

// Ready batches a loop's dequeue takes at most: a few steps' worth, one message.
constexpr int64_t kBatchesPerDequeue = 8;

// Applies `f` to each data channel the session's nodes call other tasks over.
template <class F>
void for_each_channel(const SessionState& st, F f) {
  for (const auto& [task, channels] : st.spec.remote_channels) {
    for (const auto& channel : channels) f(*channel);
  }
}

// The number observers see for loop step `index`: counted from report_base, or the global step
// that the step's fetch read, plus one (the step's own increment), when workers share it.
int64_t step_number(const LoopRequest& r, int64_t index, const std::vector<Tensor>& values) {
  const int f = r.step_number_fetch;
  if (f < 0 || f >= static_cast<int>(values.size()) || values[f].num_elements() != 1 ||
      values[f].dtype() != runtime::DType::kInt64) {
    return r.report_base + index;
  }
  return values[f].data<int64_t>()[0] + 1;
}

// Sends the observers the steps finished and not yet reported.
void report(SessionActor* self) {
  Loop& loop = *self->state.loop;
  if (!loop.unreported) return;
  std::shared_ptr<const std::vector<ReportedStep>> steps = std::move(loop.unreported);
  loop.unreported = nullptr;
  if (loop.halted) return;
  const auto& observers = loop.request.observers;
  for (size_t k = 0; k < observers.size(); ++k) {
    self->send(observers[k], StepReport{static_cast<int32_t>(k), steps});
  }
  ++loop.reported;
  loop.last_report = std::chrono::steady_clock::now();
}
void pump_loop(SessionActor* self);

// Starts step `index` of the loop with `feeds` plus what the loop's feed callback adds.
void begin_loop_step(SessionActor* self, int64_t index, runtime::FeedList feeds) {
  Loop& loop = *self->state.loop;
  if (loop.request.feed) {
    Status s = loop.request.feed(index, &feeds);
    if (s.code() == runtime::Code::kOutOfRange) {
      // The data's end, as a dry input queue: the steps in flight still report.
      loop.end_of_input = loop.stop = true;
      ++loop.finished;
      return;
    }
    if (!s.ok()) {
      loop.error = s.with_context("feeding step " + std::to_string(index));
      loop.stop = loop.halted = true;
      ++loop.finished;
      return;
    }
  }
  StepProfiler* profiler = self->state.spec.profiler.get();
  if (profiler && loop.profiling < 0 && loop.request.profile && loop.request.profile(index)) {
    loop.profiling = index;
    profiler->watch(self->state.next_step);  // the id start_step gives this step
  }
  const bool occasional = !loop.request.occasional_fetches.empty() && loop.request.occasional &&
                          loop.request.occasional(index);
  start_step(self, feeds, occasional ? loop.with_occasional : loop.request.fetches,
             loop.request.targets,
             [self, index](RunResult r) { finish_loop_step(self, index, std::move(r)); });
}

runtime::FeedList feeds_of(const LoopRequest& req, std::vector<Tensor> components) {
  runtime::FeedList feeds;
  for (size_t k = 0; k < req.input_feeds.size(); ++k) {
    feeds.push_back({req.input_feeds[k], std::move(components[k])});
  }
  return feeds;
}

// Asks the input queue for step `index`'s batch; the step starts when it arrives. The queue
// answers in the order asked, so steps still start in order.
void request_batch(SessionActor* self, int64_t index) {
  const LoopRequest& req = self->state.loop->request;
  DequeueRequest dq{req.batch_size,
                    req.allow_smaller_final_batch ? DequeueMode::kUpTo : DequeueMode::kMany};
  // Elements that are whole batches: every one that is ready, the rest kept for the next
  // steps, so that a step with tiny batches does not pay a message round trip for its input.
  if (req.batch_size == 0) dq = DequeueRequest{kBatchesPerDequeue, DequeueMode::kReady};
  self->request(req.input, caf::infinite, dequeue_atom::value, dq)
      .then(
          [self, index](Batch& b) {
            if (!self->state.loop) return;
            Loop& loop = *self->state.loop;
            loop.dequeuing = false;
            const auto& names = loop.request.input_feeds;
            if (b.status.ok() && b.components.size() != names.size()) {
              b.status = runtime::invalid_argument("the input queue gives ", b.components.size(),
                                                   " components for ", names.size(), " feeds");
            }
            if (!b.status.ok()) {
              if (b.status.code() == runtime::Code::kOutOfRange) {
                loop.end_of_input = true;
              } else {
                if (loop.error.ok()) {
                  loop.error = b.status.with_context("input of step " + std::to_string(index));
                }
                loop.halted = true;
              }
              loop.stop = true;
              ++loop.finished;
            } else {
              // Batches beyond this step's wait for the next steps, or the next loop.
              SessionState& st = self->state;
              if (loop.stop || !b.more.empty()) st.leftover_input = loop.request.input;
              if (loop.stop) st.leftover.push_back(std::move(b.components));
              for (auto& batch : b.more) st.leftover.push_back(std::move(batch));
              if (loop.stop) {
                ++loop.finished;
              } else {
                begin_loop_step(self, index, feeds_of(loop.request, std::move(b.components)));
                if (!self->state.loop) return;
              }
            }
            pump_loop(self);
          },
          [self](caf::error& e) {
            if (!self->state.loop) return;
            Loop& loop = *self->state.loop;
            loop.dequeuing = false;
            if (loop.error.ok()) {
              loop.error = runtime::unavailable("input queue: ", self->system().render(e));
            }
            loop.stop = loop.halted = true;
            ++loop.finished;
            pump_loop(self);
          });
}

// Keeps up to pipeline_depth steps of the loop in flight (counting batches asked for); answers
// when all are done.
void pump_loop(SessionActor* self) {
  SessionState& st = self->state;
  Loop& loop = *st.loop;
  if (loop.request.stop && !loop.stop && loop.request.stop->load(std::memory_order_relaxed)) {
    loop.stop = loop.stop_requested = true;
  }
  while (!loop.stop && loop.started < loop.request.steps &&
         loop.started - loop.finished < std::max(1, st.spec.pipeline_depth) &&
         loop.reported - loop.slowest_ack() < std::max<int64_t>(1, loop.request.observer_window)) {
    if (loop.request.input && st.leftover_input == loop.request.input && !st.leftover.empty() &&
        st.leftover.front().size() == loop.request.input_feeds.size()) {
      std::vector<Tensor> batch = std::move(st.leftover.front());
      st.leftover.pop_front();
      begin_loop_step(self, loop.started++, feeds_of(loop.request, std::move(batch)));
      if (!st.loop) return;
      continue;
    }
    if (loop.request.input) {
      if (loop.dequeuing) break;
      loop.dequeuing = loop.request.batch_size == 0;
      request_batch(self, loop.started++);
      continue;
    }
    begin_loop_step(self, loop.started++, {});
    if (!st.loop) return;  // finished synchronously and answered already
  }
  // With no step in flight nothing more joins the steps waiting to be reported.
  if (loop.started == loop.finished) report(self);
  if (loop.started == loop.finished && (loop.stop || loop.started == loop.request.steps) &&
      loop.slowest_ack() >= loop.reported) {
    auto done = std::move(st.loop);
    for (const caf::actor& o : done->request.observers) self->demonitor(o);
    // Its steps are over: the next loop's calls are sent again.
    if (done->abandoning) for_each_channel(st, [](net::DataChannel& c) { c.resume(); });
    // The queue ran dry, but batches taken before the stop still wait for the next loop.
    const bool more = st.leftover_input == done->request.input && !st.leftover.empty();
    done->promise.deliver(LoopResult{done->error, done->succeeded, done->end_of_input && !more,
                                     done->stop_requested, done->sync_requested});
  }
}

}  // namespace

void finish_loop_step(SessionActor* self, int64_t index, RunResult result) {
  Loop& loop = *self->state.loop;
  ++loop.finished;
  if (index == loop.profiling) {
    loop.profiling = -1;
    std::vector<NodeTiming> timings = self->state.spec.profiler->take();
    if (result.status.ok() && loop.request.on_profile) {
      loop.request.on_profile(index, std::move(timings));
    }
  }
  if (!result.status.ok()) {
    if (loop.error.ok() && !loop.abandoning) {
      loop.error = result.status.with_context("step " + std::to_string(index));
    }
    loop.stop = loop.halted = true;
  } else {
    ++loop.succeeded;
    if (!loop.halted && loop.request.on_step && !loop.request.on_step(index, result.values)) {
      loop.stop = loop.halted = true;
    }
    const int64_t number = step_number(loop.request, index, result.values);
    if (number >= loop.request.last_number) loop.stop = true;
    // Steps that ran after an observer asked to stop are still reported: they changed the model.
    if (!loop.halted && !loop.request.observers.empty()) {
      if (!loop.unreported) loop.unreported = std::make_shared<std::vector<ReportedStep>>();
      loop.unreported->push_back({number, std::move(result.values)});
      if (static_cast<int64_t>(loop.unreported->size()) >= LoopRequest::kStepsPerReport ||
          std::chrono::steady_clock::now() - loop.last_report >= loop.request.report_interval) {
        report(self);
      }
    }
  }
  pump_loop(self);
}
void on_step_ack(SessionActor* self, const StepAck& ack) {
  if (!self->state.loop) return;
  Loop& loop = *self->state.loop;
  if (ack.observer < 0 || ack.observer >= static_cast<int32_t>(loop.acked.size())) return;
  if (loop.acked[ack.observer] < INT64_MAX) ++loop.acked[ack.observer];
  if (!ack.status.ok()) {
    if (loop.error.ok()) loop.error = ack.status;
    loop.stop = loop.halted = true;
  }
  if (ack.stop) loop.stop = loop.stop_requested = true;
  if (ack.sync) loop.stop = loop.sync_requested = true;
  pump_loop(self);
}

void on_observer_down(SessionActor* self, const caf::down_msg& down) {
  if (!self->state.loop) return;
  Loop& loop = *self->state.loop;
  const auto& observers = loop.request.observers;
  for (size_t k = 0; k < observers.size(); ++k) {
    if (observers[k].address() != down.source || loop.acked[k] == INT64_MAX) continue;
    loop.acked[k] = INT64_MAX;
    if (loop.error.ok()) {
      loop.error = runtime::unavailable(
          "step observer ", k, " stopped during the loop: ", self->system().render(down.reason));
    }
    loop.stop = loop.halted = true;
  }
  pump_loop(self);
}
caf::typed_response_promise<LoopResult> start_loop(SessionActor* self, LoopRequest& req) {
  auto promise = self->make_response_promise<LoopResult>();
  if (self->state.loop) {
    promise.deliver(LoopResult{runtime::failed_precondition("a loop is already running"), 0});
    return promise;
  }
  if (req.input && (req.batch_size < 0 || req.input_feeds.empty())) {
    promise.deliver(LoopResult{
        runtime::invalid_argument("a loop with an input queue needs a batch size >= 0 and "
                                  "the feeds its components go to"),
        0});
    return promise;
  }
  if (req.input != self->state.leftover_input) {
    self->state.leftover.clear();  // from a queue this loop does not read
    self->state.leftover_input = nullptr;
  }
  auto loop = std::make_unique<Loop>();
  loop->request = std::move(req);
  loop->with_occasional = loop->request.fetches;
  loop->with_occasional.insert(loop->with_occasional.end(),
                               loop->request.occasional_fetches.begin(),
                               loop->request.occasional_fetches.end());
  loop->promise = promise;
  loop->acked.assign(loop->request.observers.size(), 0);
  for (const caf::actor& o : loop->request.observers) self->monitor(o);
  self->state.loop = std::move(loop);
  pump_loop(self);
  return promise;
}

void stop_loop(SessionActor* self, bool abandon) {
  SessionState& st = self->state;
  if (!st.loop) return;
  st.loop->stop = st.loop->stop_requested = true;
  if (abandon) {
    st.loop->abandoning = true;
    for_each_channel(st, [](net::DataChannel& c) { c.abandon("the loop stopped waiting"); });
  }
  pump_loop(self);
}

}  // namespace troupe::actors::session
