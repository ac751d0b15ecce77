// Typed params: conversions by name, text both ways, and errors that name the parameter.
#include "estimators/canned/params.h"

#include <doctest/doctest.h>

#include "estimators/canned/dnn.h"

using namespace troupe;
using namespace troupe::estimators;

TEST_CASE("ParamValue keeps text as text and numbers as their kind") {
  // A string literal must not become a bool (the pre-P0608 variant pitfall).
  CHECK(std::holds_alternative<std::string>(ParamValue("adam")));
  CHECK(std::holds_alternative<int64_t>(ParamValue(5)));
  CHECK(std::holds_alternative<double>(ParamValue(0.5)));
  CHECK(to_text(ParamValue(0.001)) == "0.001");
  CHECK(to_text(ParamValue(0.1 + 0.2)) == "0.30000000000000004");
  CHECK(to_text(ParamValue(std::vector<int64_t>{64, 32})) == "64,32");
  CHECK(to_text(ParamValue(true)) == "true");
}

TEST_CASE("params by name: round trip, conversions, validation, nothing half-set") {
  DNNOptions o;
  const ParamMap before = params_of(o, Task::kClassifier);
  CHECK(before.count("n_classes") == 1);
  CHECK(before.count("label_dimension") == 0);
  CHECK(params_of(o, Task::kRegressor).count("label_dimension") == 1);

  // An integer where a double is wanted, a whole double where an integer is, one unit as a list.
  REQUIRE(assign_params(o, Task::kClassifier,
                        ParamMap{{"learning_rate", 1}, {"epochs", 3.0}, {"hidden_units", 7}}, "M")
              .ok());
  CHECK(o.optimizer.learning_rate == 1.0);
  CHECK(o.fit.epochs == 3);
  CHECK(o.hidden_units == std::vector<int64_t>{7});

  // Text as the CLI gives it reads back to the same params.
  DNNOptions copy;
  REQUIRE(
      assign_params(copy, Task::kClassifier, to_text(params_of(o, Task::kClassifier)), "M").ok());
  CHECK(to_text(params_of(copy, Task::kClassifier)) == to_text(params_of(o, Task::kClassifier)));

  // One bad value leaves every param as it was, and says which.
  const auto kept = to_text(params_of(o, Task::kClassifier));
  auto s = assign_params(o, Task::kClassifier, ParamMap{{"dropout", 0.5}, {"epochs", 2.5}}, "M");
  CHECK(s.message() == "M parameter epochs: '2.5' is not valid");
  s = assign_params(o, Task::kClassifier, TextParams{{"dropout", "0.5"}, {"activation", "gelu"}},
                    "M");
  CHECK(s.message().find("activation") != std::string::npos);
  s = assign_params(o, Task::kClassifier, TextParams{{"hidden_units", "64,x"}}, "M");
  CHECK(s.message() == "M parameter hidden_units: '64,x' is not valid");
  s = assign_params(o, Task::kClassifier, TextParams{{"shuffle", "maybe"}}, "M");
  CHECK(s.message() == "M parameter shuffle: 'maybe' is not valid");
  CHECK(to_text(params_of(o, Task::kClassifier)) == kept);
}

TEST_CASE("optimizers by their short names keep the learning rate") {
  for (const char* name : {"adam", "sgd", "momentum", "adagrad", "rmsprop", "ftrl"}) {
    ops::Optimizer from = ops::Optimizer::sgd(0.25);
    from.clip_norm = 5;
    auto o = optimizer_named(name, from);
    REQUIRE(o.ok());
    CHECK(optimizer_key(*o) == name);
    CHECK(o->learning_rate == 0.25);
    CHECK(o->clip_norm == 5);
  }
  CHECK(optimizer_named("adamw").status().message().find("'adamw'") != std::string::npos);
}

TEST_CASE("a list of words reads back as it was, commas and backslashes inside words too") {
  const std::vector<std::string> words = {"a,b", "c\\d", "plain", "end,"};
  const std::string text = to_text(ParamValue{words});
  CHECK(text == "a\\,b,c\\\\d,plain,end\\,");
  ParamValue back;
  REQUIRE(parse_like(ParamValue{std::vector<std::string>{}}, text, &back));
  CHECK(std::get<std::vector<std::string>>(back) == words);
  // Text written before escaping existed reads as it did.
  REQUIRE(parse_like(ParamValue{std::vector<std::string>{}}, "x,y,z", &back));
  CHECK(std::get<std::vector<std::string>>(back) == std::vector<std::string>{"x", "y", "z"});
}
