#include "estimators/export/batcher.h"

#include <cstring>
#include <deque>
#include <map>

#include "actors/messages.h"

namespace troupe::serving {

using runtime::concat_rows;
using runtime::Result;
using runtime::slice_rows;
using runtime::Tensor;

// Named (not anonymous) so that CAF may carry pointers to them in messages.
namespace batching {

struct Request {
  std::string signature;
  NamedTensors inputs;
  std::chrono::steady_clock::time_point enqueued;
  int64_t rows = 0;
  bool sparse = false;  // a sparse input's parts do not concatenate by rows: it runs alone
  PredictDone done;
};

// Requests that run as one call of the predictor.
struct Batch {
  std::string signature;
  std::vector<Request> requests;
};

}  // namespace batching
}  // namespace troupe::serving

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<troupe::serving::batching::Request>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<troupe::serving::batching::Batch>)

namespace troupe::serving {
namespace {

using batching::Batch;
using batching::Request;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

// Requests batch together when they share the signature and every input's dimensions after the
// first: "serving_default|x:4,|".
std::string batch_key(const Request& r) {
  std::string key = r.signature + "|";
  for (const auto& [name, t] : r.inputs) {
    key += name + ":";
    for (int d = 1; d < t.rank(); ++d) key += std::to_string(t.dim(d)) + ",";
    key += "|";
  }
  return key;
}

// Runs a batch and gives every request its rows. When an output does not have the batch's rows
// in dimension 0 the outputs cannot be split: the requests then run one by one.
void run_batch(Predictor& p, Batch& b, BatcherStats& stats, const BatchingOptions& o) {
  stats.requests += static_cast<int64_t>(b.requests.size());
  ++stats.batches;
  if (o.on_batch) {
    const auto now = std::chrono::steady_clock::now();
    int64_t rows = 0;
    std::vector<std::chrono::microseconds> waits;
    for (const Request& r : b.requests) {
      rows += r.rows;
      waits.push_back(std::chrono::duration_cast<std::chrono::microseconds>(now - r.enqueued));
    }
    o.on_batch(rows, waits);
  }
  if (b.requests.size() == 1) {
    Request& r = b.requests[0];
    r.done(p.predict(r.inputs, r.signature));
    return;
  }
  NamedTensors merged;
  int64_t total = 0;
  for (const Request& r : b.requests) total += r.rows;
  for (const auto& [name, first] : b.requests[0].inputs) {
    std::vector<Tensor> parts;
    for (const Request& r : b.requests) parts.push_back(r.inputs.at(name));
    merged[name] = concat_rows(parts);
  }
  Result<NamedTensors> out = p.predict(merged, b.signature);
  bool splits = out.ok();
  if (out.ok()) {
    for (const auto& [name, t] : *out) splits = splits && t.rank() > 0 && t.dim(0) == total;
  }
  if (!splits) {
    for (Request& r : b.requests) r.done(p.predict(r.inputs, r.signature));
    return;
  }
  int64_t first = 0;
  for (Request& r : b.requests) {
    NamedTensors mine;
    for (const auto& [name, t] : *out) mine[name] = slice_rows(t, first, r.rows);
    first += r.rows;
    r.done(std::move(mine));
  }
}

struct Queue {
  std::vector<Request> requests;
  int64_t rows = 0;
  uint64_t opened = 0;  // which timer cuts it
};

struct BatcherState {
  BatchingOptions options;
  std::map<std::string, Queue> open;  // by batch_key
  std::deque<std::shared_ptr<Batch>> ready;
  std::vector<caf::actor> idle;
  int runners = 0;
  int64_t waiting = 0;  // requests not yet handed to a runner
  uint64_t timers = 0;
  bool draining = false;
  caf::response_promise drained;
};

using BatcherActor = caf::stateful_actor<BatcherState>;

caf::behavior runner_actor(caf::event_based_actor*, std::shared_ptr<Predictor> predictor,
                           std::shared_ptr<BatcherStats> stats, BatchingOptions options) {
  return {[predictor, stats, options](std::shared_ptr<Batch>& b) {
    run_batch(*predictor, *b, *stats, options);
    return done_atom::value;
  }};
}

void cut(BatcherActor* self, const std::string& key) {
  BatcherState& st = self->state;
  auto it = st.open.find(key);
  if (it == st.open.end()) return;
  auto b = std::make_shared<Batch>();
  b->signature = it->second.requests[0].signature;
  b->requests = std::move(it->second.requests);
  st.open.erase(it);
  st.ready.push_back(std::move(b));
}

// The key of the open batch waiting longest.
const std::string* oldest_open(const BatcherState& st) {
  const std::string* oldest = nullptr;
  uint64_t opened = 0;
  for (const auto& [key, q] : st.open) {
    if (oldest == nullptr || q.opened < opened) {
      oldest = &key;
      opened = q.opened;
    }
  }
  return oldest;
}

void dispatch(BatcherActor* self) {
  BatcherState& st = self->state;
  while (!st.idle.empty()) {
    if (st.ready.empty()) {
      // A free runner takes what is queued: waiting would only add latency.
      const std::string* key = st.options.adaptive ? oldest_open(st) : nullptr;
      if (key == nullptr) break;
      cut(self, std::string(*key));
    }
    caf::actor runner = st.idle.back();
    st.idle.pop_back();
    std::shared_ptr<Batch> b = std::move(st.ready.front());
    st.ready.pop_front();
    st.waiting -= static_cast<int64_t>(b->requests.size());
    self->request(runner, caf::infinite, b).then([self, runner](done_atom) {
      self->state.idle.push_back(runner);
      dispatch(self);
    });
  }
  if (st.draining && st.open.empty() && st.ready.empty() &&
      static_cast<int>(st.idle.size()) == st.runners && st.drained.pending()) {
    for (const caf::actor& r : st.idle) self->send_exit(r, caf::exit_reason::user_shutdown);
    st.drained.deliver(done_atom::value);
    self->quit();
  }
}

caf::behavior batcher_actor(BatcherActor* self, std::shared_ptr<Predictor> predictor,
                            BatchingOptions options, std::shared_ptr<BatcherStats> stats) {
  BatcherState& st = self->state;
  st.options = options;
  st.runners = options.num_batch_threads;
  for (int i = 0; i < st.runners; ++i) {
    st.idle.push_back(
        self->spawn<caf::detached + caf::linked>(runner_actor, predictor, stats, options));
  }
  return {
      [self](std::shared_ptr<Request>& in) {
        BatcherState& st = self->state;
        const BatchingOptions& o = st.options;
        const int64_t limit = static_cast<int64_t>(o.max_enqueued_batches) *
                              std::max(1, o.enabled ? o.max_batch_size : 1);
        if (st.draining || st.waiting >= limit) {
          in->done(runtime::unavailable(st.draining ? "the server is shutting down"
                                                    : "the batching queue is full: try again"));
          return;
        }
        ++st.waiting;
        // Adaptive, with a runner free (so nothing is queued), it goes now: no queue, no timer.
        const bool alone = !o.enabled || in->rows >= o.max_batch_size || in->sparse ||
                           (o.adaptive && !st.idle.empty());
        const std::string key = alone ? std::string() : batch_key(*in);
        if (alone) {
          auto b = std::make_shared<Batch>();
          b->signature = in->signature;
          b->requests.push_back(std::move(*in));
          st.ready.push_back(std::move(b));
          dispatch(self);
          return;
        }
        Queue& q = st.open[key];
        // A request that would overflow the open batch closes it first.
        if (q.rows > 0 && q.rows + in->rows > o.max_batch_size) cut(self, key);
        Queue& target = st.open[key];
        if (target.requests.empty()) {
          target.opened = ++st.timers;
          if (o.batch_timeout.count() > 0) {
            self->delayed_send(self, o.batch_timeout, flush_atom::value, key, target.opened);
          }
        }
        target.rows += in->rows;
        target.requests.push_back(std::move(*in));
        if (target.rows >= o.max_batch_size || o.batch_timeout.count() == 0) cut(self, key);
        dispatch(self);
      },
      [self](flush_atom, const std::string& key, uint64_t opened) {
        auto it = self->state.open.find(key);
        if (it != self->state.open.end() && it->second.opened == opened) cut(self, key);
        dispatch(self);
      },
      [self](actors::stop_atom) {
        BatcherState& st = self->state;
        st.draining = true;
        st.drained = self->make_response_promise();
        std::vector<std::string> keys;
        for (const auto& [key, q] : st.open) keys.push_back(key);
        for (const std::string& key : keys) cut(self, key);
        dispatch(self);
        return st.drained;
      },
  };
}

}  // namespace

Batcher::Batcher(actors::Runtime& runtime, std::shared_ptr<Predictor> predictor,
                 BatchingOptions options)
    : predictor_(std::move(predictor)), options_(options), system_(runtime.system()) {
  if (options_.num_batch_threads < 1) options_.num_batch_threads = 1;
  if (options_.max_batch_size < 1) options_.max_batch_size = 1;
  if (options_.max_enqueued_batches < 1) options_.max_enqueued_batches = 1;
  actor_ = system_.spawn(batcher_actor, predictor_, options_, stats_);
}

Batcher::~Batcher() {
  caf::scoped_actor self{system_};
  self->request(actor_, caf::infinite, actors::stop_atom::value)
      .receive([](done_atom) {}, [](caf::error&) {});
  self->wait_for(actor_);
}

void Batcher::submit(const std::string& signature, NamedTensors inputs, PredictDone done) {
  auto r = std::make_shared<Request>();
  if (runtime::Status s = predictor_->check_inputs(inputs, signature, &r->rows, &r->sparse);
      !s.ok()) {
    done(s);
    return;
  }
  // Nothing else in flight: this thread runs it, sparing the hand-offs to the batching actor
  // and a runner and back (two thread wake-ups, a third of a lone request's time).
  int64_t none = 0;
  if (options_.enabled && options_.adaptive && in_flight_->compare_exchange_strong(none, 1)) {
    ++stats_->batches;
    ++stats_->requests;
    if (options_.on_batch) options_.on_batch(r->rows, {std::chrono::microseconds(0)});
    Result<NamedTensors> out = predictor_->predict(inputs, signature);
    in_flight_->fetch_sub(1);
    done(std::move(out));
    return;
  }
  in_flight_->fetch_add(1);
  r->enqueued = std::chrono::steady_clock::now();
  r->signature = signature;
  r->inputs = std::move(inputs);
  r->done = [in_flight = in_flight_, done = std::move(done)](Result<NamedTensors> out) {
    in_flight->fetch_sub(1);
    done(std::move(out));
  };
  caf::anon_send(actor_, std::move(r));
}

}  // namespace troupe::serving
