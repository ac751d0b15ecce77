// The graph an Estimator builds for a mode: the components of a dataset's batches as
// placeholders (dense, padded, sparse as three), the model_fn's spec, and errors naming the mode.
#include "estimators/model_graph.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "harness/temp_dir.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::estimators;
using namespace troupe::runtime;

namespace {

input::Dataset table() {
  auto d = input::arrays({{"x", Tensor::from_vector(Shape{3, 2}, std::vector<float>(6, 1.f))},
                          {"y", Tensor::from_vector(Shape{3}, std::vector<int64_t>{0, 1, 0})}},
                         "y");
  REQUIRE(d.ok());
  return *d;
}

runtime::Result<EstimatorSpec> sum_model(ModelInputs& in) {
  EstimatorSpec spec;
  spec.predictions["s"] = ops::reduce_sum(in.b, in.features.at("x"), {1});
  if (in.mode == Mode::kPredict) return spec;
  spec.loss = ops::reduce_mean(in.b, spec.predictions["s"]);
  return spec;
}

}  // namespace

TEST_CASE("input_components: dense, padded and sparse components; a sparse label is refused") {
  auto dense = input_components(table());
  REQUIRE(dense.ok());
  REQUIRE(dense->size() == 2);
  CHECK((*dense)[0].name == "x");
  CHECK((*dense)[0].dims == std::vector<int64_t>{2});
  CHECK((*dense)[1].dtype == DType::kInt64);
  CHECK((*dense)[1].dims.empty());
  input::Dataset padded = table();
  padded.pad = true;
  CHECK((*input_components(padded))[0].dims == std::vector<int64_t>{-1});
  CHECK(same_components(*dense, *input_components(table())));
  CHECK(!same_components(*dense, *input_components(padded)));

  const std::string path = testing::temp_dir("model_graph.svm");
  std::ofstream(path) << "1 1:0.5 3:2\n0 2:1\n";
  auto svm = input::libsvm(path);
  REQUIRE_MESSAGE(svm.ok(), svm.status().to_string());
  auto sparse = input_components(*svm);
  REQUIRE(sparse.ok());
  std::vector<std::string> names;
  for (const InputComponent& c : *sparse) names.push_back(c.name + (c.by_example ? "" : "*"));
  CHECK(names == std::vector<std::string>{"label", "indices/indices*", "indices/values*",
                                          "indices/dense_shape*", "values/indices*",
                                          "values/values*", "values/dense_shape*"});
  input::Dataset bad = *svm;
  bad.label = "values";
  auto refused = input_components(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("the label 'values' cannot be sparse") !=
        std::string::npos);
}

TEST_CASE("build_model_graph: placeholders in component order, the spec, errors naming the mode") {
  const input::Dataset data = table();
  ModelGraph g;
  REQUIRE(
      build_model_graph(sum_model, Mode::kEval, data, *input_components(data), {}, {}, &g).ok());
  REQUIRE(g.inputs.size() == 2);
  CHECK(g.graph.shape(g.inputs[0]).to_string() == Shape{-1, 2}.to_string());
  CHECK(g.label == "y");
  CHECK(g.spec.loss.valid());
  CHECK(g.init >= 0);

  input::Dataset unlabelled = data;
  unlabelled.label = "";
  ModelGraph h;
  auto s = build_model_graph(sum_model, Mode::kTrain, unlabelled, *input_components(unlabelled), {},
                             {}, &h);
  CHECK(s.message().find("train: the dataset") != std::string::npos);
  ModelGraph p;
  CHECK(build_model_graph(sum_model, Mode::kPredict, unlabelled, *input_components(unlabelled), {},
                          {}, &p)
            .ok());

  ModelGraph e;
  auto failing = [](ModelInputs&) -> runtime::Result<EstimatorSpec> {
    return runtime::invalid_argument("no such layer");
  };
  auto f = build_model_graph(failing, Mode::kEval, data, *input_components(data), {}, {}, &e);
  CHECK(f.to_string().find("model_fn (eval)") != std::string::npos);
  CHECK(f.message().find("no such layer") != std::string::npos);
}

TEST_CASE("build_model_graph, synchronous: each update waits for the step's read of global step") {
  auto linear = [](ModelInputs& in) -> runtime::Result<EstimatorSpec> {
    EstimatorSpec spec;
    Output w = ops::variable(in.b, "w", Shape{2, 1}, DType::kFloat32,
                             ops::zeros(in.b, Shape{2, 1}, DType::kFloat32));
    spec.predictions["y"] = ops::matmul(in.b, in.features.at("x"), w);
    spec.loss = ops::reduce_mean(in.b, spec.predictions["y"]);
    spec.train_op = ops::minimize(in.b, spec.loss, ops::Optimizer::sgd(0.1));
    return spec;
  };
  const input::Dataset data = table();
  auto updates = [](const ModelGraph& g) {
    std::vector<const Node*> out;
    for (int id = 0; id < g.graph.num_nodes(); ++id) {
      const Node& n = g.graph.node(id);
      if (n.def->variable_access == VariableAccess::kWrite && n.op != "Assign") out.push_back(&n);
    }
    return out;
  };
  auto after_step = [](const ModelGraph& g, const Node& n) {
    const auto& c = n.control_inputs;
    return std::find(c.begin(), c.end(), g.global_step.node) != c.end();
  };
  RunConfig sync;
  sync.replicas_to_aggregate = 2;
  ModelGraph s;
  REQUIRE(
      build_model_graph(linear, Mode::kTrain, data, *input_components(data), {}, sync, &s).ok());
  // w's update and the global step's increment (which reads it already: no edge needed there).
  REQUIRE(updates(s).size() == 2);
  for (const Node* n : updates(s)) CHECK_MESSAGE(after_step(s, *n), n->name);
  // Alone, or asynchronous: nothing waits for it.
  ModelGraph a;
  REQUIRE(build_model_graph(linear, Mode::kTrain, data, *input_components(data), {}, {}, &a).ok());
  for (const Node* n : updates(a)) CHECK_FALSE(after_step(a, *n));
}
