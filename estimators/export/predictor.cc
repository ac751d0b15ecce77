#include "estimators/export/predictor.h"

#include "ops/sparse_ops.h"
#include "runtime/variable_store.h"

namespace troupe::serving {

using runtime::Result;
using runtime::Status;

Result<std::unique_ptr<Predictor>> Predictor::load(const std::string& dir,
                                                   PredictorOptions options) {
  if (options.sessions < 1) return runtime::invalid_argument("a predictor needs a session");
  std::unique_ptr<Predictor> p(new Predictor());
  p->dir_ = dir;
  TROUPE_ASSIGN_OR_RETURN(p->model_, read_saved_model(dir));
  actors::Runtime* rt = options.runtime;
  if (!rt) {
    p->own_runtime_ =
        std::make_unique<actors::Runtime>(actors::RuntimeOptions{.idle_spin = kServingIdleSpin});
    rt = p->own_runtime_.get();
  }
  if (options.batch_invariant) {
    for (int id = 0; id < p->model_.graph.num_nodes(); ++id) {
      if (p->model_.graph.node(id).op == "MatMul") {
        p->model_.graph.set_attr(id, "batch_invariant", true);
      }
    }
  }
  // Nothing writes an export's variables: they become constants of the graph, bound into the
  // layers that read them, so that a step runs 7 nodes instead of 13 on the DNN (six Variable
  // reads and their messages less; bench/serve_bench predictor_latency). Variables the export
  // holds no value for stay variables.
  for (int id : p->model_.graph.variables()) {
    const runtime::Node& n = p->model_.graph.node(id);
    auto value = p->model_.variables.tensors.find(n.attr<std::string>("var"));
    if (value == p->model_.variables.tensors.end()) continue;
    if (Status s = p->model_.graph.freeze_variable(id, value->second); !s.ok()) {
      return runtime::make_error(s.code(), dir, ": ", s.message());
    }
  }
  auto store = std::make_shared<runtime::VariableStore>();
  runtime::load_into(p->model_.variables, store.get());
  for (int i = 0; i < options.sessions; ++i) {
    auto s =
        actors::Session::create(*rt, p->model_.graph, {.pipeline_depth = 1, .variables = store});
    if (!s.ok()) {
      return runtime::make_error(s.status().code(), dir,
                                 ": cannot run its graph: ", s.status().message());
    }
    p->free_.push_back(s->get());
    p->sessions_.push_back(std::move(*s));
  }
  return p;
}

Predictor::~Predictor() {
  sessions_.clear();  // the sessions' actors end before the runtime that holds them
  own_runtime_.reset();
}

namespace {

// Which of a sparse input's parts (an index into ops::kSparseParts) input `name` of `sig` is,
// or -1: its name ends in a part's suffix and the signature has all three parts.
int sparse_part(const Signature& sig, const std::string& name) {
  for (int i = 0; i < 3; ++i) {
    const std::string suffix = ops::kSparseParts[static_cast<size_t>(i)];
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - suffix.size());
    for (const char* part : ops::kSparseParts) {
      if (!sig.inputs.count(base + part)) return -1;
    }
    return i;
  }
  return -1;
}

}  // namespace

const Signature* Predictor::signature(const std::string& name) const {
  auto it = model_.signatures.find(name);
  return it == model_.signatures.end() ? nullptr : &it->second;
}

Status Predictor::check_inputs(const NamedTensors& inputs, const std::string& signature,
                               int64_t* batch, bool* sparse) const {
  const Signature* sig = this->signature(signature);
  if (!sig) return runtime::not_found("the model has no signature '", signature, "'");
  *batch = -1;
  if (sparse) *sparse = false;
  std::string batch_input;
  for (const auto& [name, t] : inputs) {
    if (!sig->inputs.count(name)) {
      return runtime::invalid_argument("signature ", signature, " has no input '", name, "'");
    }
  }
  for (const auto& [name, info] : sig->inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end() || !it->second.valid()) {
      return runtime::invalid_argument("input '", name, "' is missing");
    }
    const runtime::Tensor& t = it->second;
    if (t.dtype() != info.dtype) {
      return runtime::invalid_argument("input '", name, "' must be ",
                                       runtime::dtype_name(info.dtype), ", not ",
                                       runtime::dtype_name(t.dtype()));
    }
    if (info.shape.rank_known()) {
      bool fits = t.rank() == info.shape.rank();
      for (int d = 0; fits && d < t.rank(); ++d) {
        fits = info.shape.dim(d) < 0 || info.shape.dim(d) == t.dim(d);
      }
      if (!fits) {
        return runtime::invalid_argument("input '", name, "' must have shape ",
                                         info.shape.to_string(), ", not ", t.shape().to_string());
      }
    }
    int64_t rows = t.rank() > 0 ? t.dim(0) : 1;
    if (const int part = sparse_part(*sig, name); part >= 0) {
      if (sparse) *sparse = true;
      if (part != 2) continue;  // dense_shape counts the rows
      if (t.num_elements() < 1) {
        return runtime::invalid_argument("input '", name, "' is empty: it needs the rank's sizes");
      }
      rows = t.data<int64_t>()[0];
    }
    if (*batch >= 0 && rows != *batch) {
      return runtime::invalid_argument("inputs '", batch_input, "' and '", name,
                                       "' differ in dimension 0 (", *batch, " and ", rows, ")");
    }
    *batch = rows;
    batch_input = name;
  }
  if (*batch < 0) *batch = 1;
  return runtime::ok_status();
}

Result<NamedTensors> Predictor::predict(const NamedTensors& inputs, const std::string& signature,
                                        const std::vector<std::string>& outputs) {
  int64_t batch = 0;
  TROUPE_RETURN_IF_ERROR(check_inputs(inputs, signature, &batch));
  const Signature& sig = *this->signature(signature);
  runtime::FeedList feeds;
  for (const auto& [name, info] : sig.inputs) feeds.push_back({info.tensor, inputs.at(name)});
  std::vector<std::string> names = outputs;
  if (names.empty()) {
    for (const auto& [name, info] : sig.outputs) names.push_back(name);
  }
  std::vector<runtime::Output> fetches;
  for (const std::string& name : names) {
    auto it = sig.outputs.find(name);
    if (it == sig.outputs.end()) {
      return runtime::invalid_argument("signature ", signature, " has no output '", name, "'");
    }
    fetches.push_back(it->second.tensor);
  }
  actors::Session* session = acquire();
  auto values = session->run(feeds, fetches);
  release(session);
  if (!values.ok()) return values.status();
  NamedTensors result;
  for (size_t i = 0; i < names.size(); ++i) result[names[i]] = std::move((*values)[i]);
  return result;
}

actors::Session* Predictor::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  free_cv_.wait(lock, [this] { return !free_.empty(); });
  actors::Session* s = free_.back();
  free_.pop_back();
  return s;
}

void Predictor::release(actors::Session* s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(s);
  }
  free_cv_.notify_one();
}

}  // namespace troupe::serving
