// A model_fn of one's own as a Model: fitted, predicted and scored as a canned model is, its
// params searched by GridSearchCV and scored by cross_val_score with scikit-learn's scoring
// names; bad params and scoring names are errors naming them.
#include "estimators/canned/custom_model.h"

#include <doctest/doctest.h>

#include "estimators/canned/test_data.h"
#include "estimators/metrics.h"
#include "estimators/selection/model_selection.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

namespace {

// Softmax regression over x's 2 numbers into 3 classes, at the params' learning rate.
runtime::Result<EstimatorSpec> softmax_model(ModelInputs& in) {
  auto& b = in.b;
  Output x = in.features.at("x");
  Output w = ops::variable(b, "w", Shape{2, 3}, DType::kFloat32,
                           ops::zeros(b, Shape{2, 3}, DType::kFloat32));
  Output bias =
      ops::variable(b, "b", Shape{3}, DType::kFloat32, ops::zeros(b, Shape{3}, DType::kFloat32));
  Output logits = ops::bias_add(b, ops::matmul(b, x, w), bias);
  EstimatorSpec spec;
  spec.predictions["classes"] = ops::argmax(b, logits, 1);
  if (in.mode == Mode::kPredict) return spec;
  Output labels = ops::cast(b, in.labels, DType::kInt64);
  spec.loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits));
  if (in.mode == Mode::kTrain) {
    spec.train_op =
        ops::minimize(b, spec.loss, ops::Optimizer::sgd(param(in.params, "learning_rate", 0.1)));
  }
  return spec;
}

CustomModelOptions options() {
  CustomModelOptions o;
  o.params = {{"learning_rate", 0.1}};
  o.fit.epochs = 20;
  o.fit.batch_size = 32;
  return o;
}

}  // namespace

TEST_CASE("a custom model_fn fits, predicts and scores as a Model, and GridSearchCV searches it") {
  Tensor x, y;
  test::blobs(300, 3, 2, 7, &x, &y);
  RunConfig quiet;
  quiet.tf_random_seed = 3;
  quiet.log_step_count_steps = 1000000;
  CustomModel m(softmax_model, options(), quiet);
  REQUIRE(m.fit(x, y).ok());
  auto accuracy = m.score(x, y);
  REQUIRE(accuracy.ok());
  CHECK(*accuracy > 0.9);
  // Scored by name: macro F1 of the predictions, as the metric computes it.
  auto predicted = m.predict(x);
  REQUIRE(predicted.ok());
  auto f1 = make_metric("f1:3:macro");
  REQUIRE(f1.ok());
  REQUIRE((*f1)->update(y, *predicted).ok());
  auto by_name = score_by(m, x, y, "f1_macro");
  REQUIRE(by_name.ok());
  CHECK(*by_name == doctest::Approx((*f1)->result()));
  auto unknown = score_by(m, x, y, "f2_macro");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("scoring 'f2_macro' is not") != std::string::npos);

  // Its params are the model_fn's and FitParams'; others, or values of another kind, refused.
  CHECK(std::get<double>(m.get_params().at("learning_rate")) == 0.1);
  CHECK(m.get_params().count("batch_size") == 1);
  auto bad = m.set_params({{"depth", int64_t{3}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.message().find("depth") != std::string::npos);
  CHECK_FALSE(m.set_params({{"learning_rate", std::string("fast")}}).ok());
  CHECK(m.set_params({{"learning_rate", int64_t{1}}}).ok());  // converted to 1.0
  CHECK(std::get<double>(m.get_params().at("learning_rate")) == 1.0);

  // A search over the learning rate, by macro F1: a rate of 1e-6 learns little in 20 epochs.
  GridSearchCV search(CustomModel(softmax_model, options(), quiet),
                      {{{"learning_rate", {1e-6, 0.2}}}},
                      {.cv = {.n_splits = 3, .scoring = "f1_macro"}});
  REQUIRE_MESSAGE(search.fit(x, y).ok(), "search");
  CHECK(std::get<double>(search.best_params().at("learning_rate")) == 0.2);
  CHECK(search.best_score() > 0.85);
  CHECK(search.mean_test_scores()[0] < search.mean_test_scores()[1] - 0.2);
  auto cv = cross_val_score(CustomModel(softmax_model, options(), quiet), x, y,
                            {.n_splits = 3, .scoring = "accuracy"});
  REQUIRE(cv.ok());
  CHECK(cv->size() == 3);
  for (double s : *cv) CHECK(s > 0.85);
}
