// A loaded export (saved_model.h) that answers predictions, as tf.contrib.predictor or a servable
// of TF Serving: the signature's graph runs in sessions of node actors on the export's variables,
// frozen into constants of the graph (nothing writes them).
//
//   auto p = serving::load("exports/1733100000");          // Result<unique_ptr<Predictor>>
//   if (!p.ok()) ...;                                      // names the file that is wrong
//   auto out = (*p)->predict({{"image", batch}});          // Result<map<string, Tensor>>
//   auto cls = (*p)->predict({{"image", batch}}, "classification");
//
// Inputs are checked against the signature (every input present, nothing else, dtype, rank and
// the fixed dimensions, one batch size across inputs) and an error names the input. Thread-safe:
// `sessions` sessions share the variables, each serving one call at a time, so that this many
// calls run at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/runtime_system.h"
#include "actors/session.h"
#include "estimators/export/saved_model.h"

namespace troupe::serving {

// How long the workers of a runtime that serves predictions poll for the next request before
// they park (actors/scheduler.h): longer than a client takes to send its next request after an
// answer over loopback HTTP (about 70 us here), so that a steady client never finds the worker
// parked (at 1 connection, 1.3-1.4x the requests/s of parking at once; bench/serve_bench).
inline constexpr std::chrono::microseconds kServingIdleSpin{300};

struct PredictorOptions {
  int sessions = 1;
  // Each row's outputs independent of the other rows of a call (matrix products row by row),
  // so that a server batching requests answers each what it would answer it alone. Off, a call
  // answers what the training session answers for the same batch.
  bool batch_invariant = false;
  // The runtime the sessions' actors live in; null: one of the predictor's own, whose workers
  // poll for kServingIdleSpin.
  actors::Runtime* runtime = nullptr;
};

using NamedTensors = std::map<std::string, runtime::Tensor>;

class Predictor {
 public:
  static runtime::Result<std::unique_ptr<Predictor>> load(const std::string& dir,
                                                          PredictorOptions options = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // The signature's outputs (only `outputs` when given) for `inputs`.
  runtime::Result<NamedTensors> predict(const NamedTensors& inputs,
                                        const std::string& signature = kDefaultSignature,
                                        const std::vector<std::string>& outputs = {});
  // OK when `inputs` fit the signature; InvalidArgument naming the input otherwise. Sets *batch
  // to the inputs' dimension 0 (1 for scalars), and *sparse (when given) to whether a sparse
  // input is among them: three inputs <name>/indices, /values, /dense_shape (ops/sparse_ops.h),
  // whose rows dense_shape[0] counts.
  runtime::Status check_inputs(const NamedTensors& inputs, const std::string& signature,
                               int64_t* batch, bool* sparse = nullptr) const;

  const SavedModel& model() const { return model_; }
  const Signature* signature(const std::string& name) const;
  int64_t version() const { return model_.version; }
  const std::string& dir() const { return dir_; }

 private:
  Predictor() = default;
  // A free session, waiting for one when all are busy.
  actors::Session* acquire();
  void release(actors::Session* s);

  std::string dir_;
  SavedModel model_;
  std::unique_ptr<actors::Runtime> own_runtime_;
  std::vector<std::unique_ptr<actors::Session>> sessions_;
  std::mutex mu_;
  std::condition_variable free_cv_;
  std::vector<actors::Session*> free_;
};

inline runtime::Result<std::unique_ptr<Predictor>> load(const std::string& dir,
                                                        PredictorOptions options = {}) {
  return Predictor::load(dir, options);
}

}  // namespace troupe::serving
