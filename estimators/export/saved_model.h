// The export format: what Estimator::export_saved_model writes and serving::load reads, as TF's
// SavedModel. A model lives in BASE/<version>/ (an integer, the seconds of its export), holding
//
//   saved_model.json     format version, global step, and the signatures (below)
//   graph.capnp          the prediction graph (schema/graph.capnp)
//   variables/variables.ckpt   the variables that graph reads (schema/checkpoint.capnp, CRC'd)
//   assets/              files the graph needs beside its variables (vocabularies), by name
//   assets.extra/        files for the server (TF Serving's tf_serving_warmup_requests)
//
//   SavedModel m{.graph = g, .variables = vars, .signatures = {{"serving_default", sig}}};
//   auto dir = write_saved_model("exports", m);          // Result<string>: exports/1733100000
//   auto back = read_saved_model(*dir);                  // Result<SavedModel>, every file checked
//   auto versions = list_versions("exports");            // Result<vector<int64_t>>, ascending
//
// A signature names each input and output, its dtype, its shape (-1 where it varies: dimension 0
// is the batch) and the graph tensor behind it. Methods follow TF Serving: "predict" (any
// outputs), "classify" (outputs "scores" [batch, classes] and optionally "classes"), "regress"
// (output "outputs", [batch] or [batch, 1]). Reading checks every file and says which one is
// wrong and why; nothing is half-loaded.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/checkpoint.h"
#include "runtime/graph.h"
#include "runtime/status.h"

namespace troupe::serving {

inline constexpr const char* kDefaultSignature = "serving_default";

struct TensorInfo {
  runtime::DType dtype = runtime::DType::kInvalid;
  runtime::Shape shape;    // -1 where it varies
  runtime::Output tensor;  // in the graph
};

struct Signature {
  std::string method;  // "predict", "classify" or "regress"
  std::map<std::string, TensorInfo> inputs;
  std::map<std::string, TensorInfo> outputs;
};

struct SavedModel {
  runtime::Graph graph;
  runtime::CheckpointData variables;
  std::map<std::string, Signature> signatures;
  std::map<std::string, std::string> assets;  // file name -> contents
  // Files for the server, not the graph (TF's assets.extra: tf_serving_warmup_requests), by
  // name; written into assets.extra/, read by whoever serves it.
  std::map<std::string, std::string> assets_extra;
  // Class names for classify results, index by index (empty: the indices as text).
  std::vector<std::string> class_labels;
  int64_t version = 0;  // read_saved_model: the folder's name
};

// Writes `model` into base/<version>, the seconds since the epoch (one more than the newest
// existing version when that is not newer, so that exports in one second stay ordered). The
// folder appears whole or not at all: it is written under a temporary name and renamed.
runtime::Result<std::string> write_saved_model(const std::string& base, const SavedModel& model);
// Reads and checks an export folder (base/<version>).
runtime::Result<SavedModel> read_saved_model(const std::string& dir);
// The versions under base (folders named by a positive integer), ascending; NotFound when base
// does not exist.
runtime::Result<std::vector<int64_t>> list_versions(const std::string& base);

// A signature of `graph` from its tensors: dtype and shape read from the graph.
Signature make_signature(const runtime::Graph& graph, const std::string& method,
                         const std::map<std::string, runtime::Output>& inputs,
                         const std::map<std::string, runtime::Output>& outputs);
// "predict" -> "tensorflow/serving/predict", as metadata responses spell methods.
std::string method_name(const std::string& method);

}  // namespace troupe::serving
