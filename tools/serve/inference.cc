#include "tools/serve/inference.h"

#include <future>

namespace troupe::serve {

using runtime::Result;
using runtime::Tensor;
using serving::NamedTensors;
using serving::Signature;

namespace {

double as_double(const Tensor& t, int64_t i) {
  double v = 0;
  runtime::visit_numeric(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    v = static_cast<double>(t.data<T>()[i]);
  });
  return v;
}

}  // namespace

Result<std::string> choose_signature(const serving::Predictor& p, const std::string& given,
                                     const std::string& method) {
  if (!given.empty()) {
    const Signature* s = p.signature(given);
    if (!s) {
      return runtime::invalid_argument("Serving signature name: \"", given,
                                       "\" not found in signature def");
    }
    if (method != "predict" && s->method != method) {
      return runtime::invalid_argument("signature \"", given, "\" is a ", s->method,
                                       " signature, not ", method);
    }
    return given;
  }
  const Signature* d = p.signature(serving::kDefaultSignature);
  if (method == "predict" || (d && d->method == method)) {
    if (!d) return runtime::invalid_argument("the model has no serving_default signature");
    return std::string(serving::kDefaultSignature);
  }
  const std::string canned = method == "classify" ? "classification" : "regression";
  if (!p.signature(canned)) {
    return runtime::invalid_argument("the model has no ", method,
                                     " signature (serving_default is not one, and there is no \"",
                                     canned, "\")");
  }
  return canned;
}

bool takes_examples(const Signature& sig) {
  return sig.inputs.size() == 1 && sig.inputs.begin()->first == "inputs" &&
         sig.inputs.begin()->second.dtype == runtime::DType::kString;
}

Result<NamedTensors> run_and_wait(Servable& s, const std::string& signature, NamedTensors inputs) {
  if (!s.batcher) return s.predictor->predict(inputs, signature);
  // The callback holds only the promise: the servable stays with the caller.
  auto answer = std::make_shared<std::promise<Result<NamedTensors>>>();
  auto done = answer->get_future();
  s.batcher->submit(signature, std::move(inputs),
                    [answer](Result<NamedTensors> out) { answer->set_value(std::move(out)); });
  return done.get();
}

Result<Classes> classes_of(const NamedTensors& out, const std::vector<std::string>& labels) {
  auto it = out.find("scores");
  if (it == out.end() || it->second.rank() != 2 || !runtime::is_numeric(it->second.dtype())) {
    return runtime::internal_error("the classify signature's scores are not [batch, classes]");
  }
  const Tensor& scores = it->second;
  const int64_t batch = scores.dim(0), classes = scores.dim(1);
  const Tensor* names = nullptr;
  if (auto c = out.find("classes"); c != out.end() && c->second.rank() == 2 &&
                                    c->second.dim(0) == batch && c->second.dim(1) == classes) {
    names = &c->second;
  }
  Classes result;
  result.dtype = scores.dtype();
  for (int64_t i = 0; i < batch; ++i) {
    auto& row = result.rows.emplace_back();
    for (int64_t j = 0; j < classes; ++j) {
      std::string label;
      if (names && names->dtype() == runtime::DType::kString) {
        label = names->data<std::string>()[i * classes + j];
      } else if (names) {
        label = std::to_string(static_cast<int64_t>(as_double(*names, i * classes + j)));
      } else {
        label = j < static_cast<int64_t>(labels.size()) ? labels[j] : std::to_string(j);
      }
      row.emplace_back(std::move(label), as_double(scores, i * classes + j));
    }
  }
  return result;
}

Result<Regressions> regressions_of(const NamedTensors& out) {
  auto it = out.find("outputs");
  if (it == out.end() || it->second.rank() < 1 || it->second.num_elements() != it->second.dim(0) ||
      !runtime::is_numeric(it->second.dtype())) {
    return runtime::internal_error("the regress signature's outputs are not [batch] or [batch, 1]");
  }
  Regressions result;
  result.dtype = it->second.dtype();
  for (int64_t i = 0; i < it->second.dim(0); ++i) result.values.push_back(as_double(it->second, i));
  return result;
}

}  // namespace troupe::serve
