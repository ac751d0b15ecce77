// Server-side batching of predictions, as TF Serving's batching: a batching actor gathers the
// requests for one signature into a batch of at most max_batch_size rows, or what came within
// batch_timeout of the first, and hands it to one of num_batch_threads runner actors (each on a
// thread of its own, each with a session of the predictor); the runner splits the outputs back
// into each request's rows. Every request gets exactly the rows it would have got alone.
//
//   serving::Batcher batcher(runtime, predictor, {.max_batch_size = 32});
//   batcher.submit("serving_default", {{"image", rows}}, [](Result<NamedTensors> out) { ... });
//
// `done` runs on a runner's thread, once per request. With batching off each request is a batch
// of its own (the runners still run num_batch_threads at once). Requests beyond
// max_enqueued_batches * max_batch_size waiting get Unavailable at once, so that a flood queues
// no unbounded memory. Destroying the Batcher finishes what was submitted first.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "actors/runtime_system.h"
#include "estimators/export/predictor.h"

namespace troupe::serving {

struct BatchingOptions {
  bool enabled = true;
  int max_batch_size = 32;  // rows
  std::chrono::microseconds batch_timeout{1000};
  int num_batch_threads = 2;
  int max_enqueued_batches = 64;
};

using PredictDone = std::function<void(runtime::Result<NamedTensors>)>;

// What the runners have done so far.
struct BatcherStats {
  std::atomic<int64_t> batches{0};   // calls of the predictor
  std::atomic<int64_t> requests{0};  // answered
};

class Batcher {
 public:
  // The predictor needs num_batch_threads sessions to run that many batches at once.
  Batcher(actors::Runtime& runtime, std::shared_ptr<Predictor> predictor, BatchingOptions options);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Checks `inputs` against the signature first (done gets the error at once).
  void submit(const std::string& signature, NamedTensors inputs, PredictDone done);
  const BatchingOptions& options() const { return options_; }
  const BatcherStats& stats() const { return *stats_; }

 private:
  std::shared_ptr<Predictor> predictor_;
  BatchingOptions options_;
  std::shared_ptr<BatcherStats> stats_ = std::make_shared<BatcherStats>();
  caf::actor actor_;
  caf::actor_system& system_;
};

}  // namespace troupe::serving
