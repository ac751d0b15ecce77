// What TF Serving's REST API and its gRPC services share once a request is parsed: the signature
// a verb runs, a run on a served version (through its batcher when it has one), and a classify or
// regress signature's outputs read as TF Serving answers them.
//
//   TROUPE_ASSIGN_OR_RETURN(auto s, models.servable("fmnist", 0, ""));     // served_models.h
//   TROUPE_ASSIGN_OR_RETURN(std::string sig, choose_signature(*s->predictor, "", "classify"));
//   auto out = run_and_wait(*s, sig, inputs);
//   TROUPE_ASSIGN_OR_RETURN(Classes c, classes_of(*out, s->predictor->model().class_labels));
//   c.rows[i] == {{"cat", 0.9}, {"dog", 0.1}}
//
// Plain functions; errors are values naming what is wrong.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "estimators/export/predictor.h"
#include "tools/serve/model_manager.h"

namespace troupe::serve {

// The signature a verb (predict, classify, regress) runs: `given` when not empty (a classify or
// regress verb must name one of its method), else serving_default when its method fits, else
// the canned estimators' name for the method ("classification", "regression").
runtime::Result<std::string> choose_signature(const serving::Predictor& p, const std::string& given,
                                              const std::string& method);

// Whether a classify or regress signature takes serialized tf.Example protos, as TF's do: one
// string input named "inputs".
bool takes_examples(const serving::Signature& sig);

// A run of `signature` on `s`, waiting for its batch when it has a batcher. The caller holds `s`
// until it returns, so that no version is unloaded on a runner's thread.
runtime::Result<serving::NamedTensors> run_and_wait(Servable& s, const std::string& signature,
                                                    serving::NamedTensors inputs);

// A classify signature's answer: per example, each class's label and score. The labels come from
// its "classes" output, else the model's class labels, else the class's index.
struct Classes {
  std::vector<std::vector<std::pair<std::string, double>>> rows;
  runtime::DType dtype = runtime::DType::kFloat32;  // of the scores
};
runtime::Result<Classes> classes_of(const serving::NamedTensors& out,
                                    const std::vector<std::string>& labels);

// A regress signature's answer: one value per example, from its "outputs" ([n] or [n, 1]).
struct Regressions {
  std::vector<double> values;
  runtime::DType dtype = runtime::DType::kFloat32;
};
runtime::Result<Regressions> regressions_of(const serving::NamedTensors& out);

}  // namespace troupe::serve
