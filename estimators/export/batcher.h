// Server-side batching of predictions, as TF Serving's batching: a batching actor gathers the
// requests for one signature into a batch of at most max_batch_size rows, or what came within
// batch_timeout of the first, and hands it to one of num_batch_threads runner actors (each on a
// thread of its own, each with a session of the predictor); the runner splits the outputs back
// into each request's rows. Every request gets exactly the rows it would have got alone.
//
// Adaptive (the default, as Triton's dynamic batcher and Clipper batch): a runner that is free
// takes what is queued at once, so a lone request waits for no company it will not get; batches
// grow only while every runner is busy, that is while requests come faster than the model
// drains them, up to max_batch_size or batch_timeout. A request that finds nothing else in
// flight runs on the caller's thread, as without batching (the predictor needs a session more
// than num_batch_threads for it). Off, every batch waits for its timeout or its rows, as TF
// Serving's does.
//
//   serving::Batcher batcher(runtime, predictor, {.max_batch_size = 32});
//   batcher.submit("serving_default", {{"image", rows}}, [](Result<NamedTensors> out) { ... });
//
// `done` runs once per request, on a runner's thread or (adaptive) the caller's. With batching off
// each request is a batch of its own (the runners still run num_batch_threads at once). Requests
// beyond max_enqueued_batches * max_batch_size waiting get Unavailable at once, so that a flood
// queues no unbounded memory. Destroying the Batcher finishes what was submitted first.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/runtime_system.h"
#include "estimators/export/predictor.h"

namespace troupe::serving {

struct BatchingOptions {
  bool enabled = true;
  int max_batch_size = 32;  // rows
  std::chrono::microseconds batch_timeout{1000};
  int num_batch_threads = 2;
  int max_enqueued_batches = 64;
  bool adaptive = true;
  // Told each batch's rows and each of its requests' wait in the queue as the batch starts (on
  // its runner's thread, or the caller's), for metrics; may be empty.
  std::function<void(int64_t rows, const std::vector<std::chrono::microseconds>& waits)> on_batch;
};

using PredictDone = std::function<void(runtime::Result<NamedTensors>)>;

// What the runners have done so far.
struct BatcherStats {
  std::atomic<int64_t> batches{0};   // calls of the predictor
  std::atomic<int64_t> requests{0};  // answered
};

class Batcher {
 public:
  // The predictor needs num_batch_threads sessions to run that many batches at once, and one more
  // when adaptive.
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
  // Requests submitted and not yet answered: an adaptive batcher runs one on the caller's thread
  // when it is the only one.
  std::shared_ptr<std::atomic<int64_t>> in_flight_ = std::make_shared<std::atomic<int64_t>>(0);
  caf::actor actor_;
  caf::actor_system& system_;
};

}  // namespace troupe::serving
