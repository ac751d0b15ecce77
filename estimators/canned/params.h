// Typed hyperparameters of the canned models, as scikit-learn's get_params / set_params see
// them. Each options struct names its fields once, in a static fields(); params by name (model
// selection), the text of a model's info file and of CLI flags all follow from that list, so
// adding a hyperparameter touches one place and the model_fn reads it typed.
//
//   struct MyOptions {
//     int64_t units = 8;
//     ops::Optimizer optimizer = ops::Optimizer::adam(0.01);
//     template <class Self, class F> static void fields(Self& o, Task, F&& f) {
//       f("units", o.units);
//       f("optimizer", o.optimizer);                       // its name: "adam", "sgd", ...
//       f("learning_rate", o.optimizer.learning_rate);
//     }
//     runtime::Status validate(Task) const;               // names the parameter that is wrong
//   };
//   MyOptions o;
//   ParamMap p = params_of(o, Task::kClassifier);          // {"learning_rate": 0.01, ...}
//   Status s = assign_params(o, Task::kClassifier, {{"units", int64_t{16}}}, "MyModel");
//   Status t = assign_params(o, Task::kClassifier, TextParams{{"units", "16"}}, "MyModel");
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ops/training_ops.h"
#include "runtime/status.h"

namespace troupe::estimators {

// What a canned model predicts; it decides the head (estimators/canned/head.h) and which
// parameters exist (n_classes for classifiers, label_dimension for regressors).
enum class Task { kClassifier, kRegressor };

using ParamValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                                std::vector<std::string>, std::vector<double>>;
using ParamMap = std::map<std::string, ParamValue>;
using TextParams = std::map<std::string, std::string>;

// A value as text: true, 16, 0.001, adam, 64,32 (lists comma-separated).
std::string to_text(const ParamValue& v);
TextParams to_text(const ParamMap& p);
// Text read as a value of `like`'s kind ("64,32" for a list of integers); false when it does
// not read as one.
bool parse_like(const ParamValue& like, const std::string& text, ParamValue* out);

// The optimizer's short name (adam, sgd, momentum, adagrad, rmsprop, ftrl), and an optimizer
// of that name keeping `from`'s learning rate and clip norm.
std::string optimizer_key(const ops::Optimizer& o);
runtime::Result<ops::Optimizer> optimizer_named(const std::string& name,
                                                const ops::Optimizer& from = {});

// The params of an optimizer's learning-rate schedule (ops/learning_rate_schedule.h), for an
// options struct's fields(): lr_schedule (cosine, ...), decay_steps, warmup_steps, ...
template <class Schedule, class F>
void schedule_fields(Schedule& s, F&& f) {
  f("lr_schedule", s.kind);
  f("decay_steps", s.decay_steps);
  f("decay_rate", s.decay_rate);
  f("staircase", s.staircase);
  f("lr_boundaries", s.boundaries);
  f("lr_factors", s.factors);
  f("lr_alpha", s.alpha);
  f("decay_power", s.power);
  f("t_mul", s.t_mul);
  f("m_mul", s.m_mul);
  f("warmup_steps", s.warmup_steps);
}

// n_classes for a classifier, label_dimension for a regressor: the width of the head's logits.
template <class Self, class F>
void output_fields(Self& o, Task task, F&& f) {
  if (task == Task::kClassifier) {
    f("n_classes", o.n_classes);
  } else {
    f("label_dimension", o.label_dimension);
  }
}

// An optimizer's params: its name (adam, ...), learning_rate, clip_norm and schedule.
template <class Optimizer, class F>
void optimizer_fields(Optimizer& o, F&& f) {
  f("optimizer", o);
  f("learning_rate", o.learning_rate);
  f("clip_norm", o.clip_norm);
  schedule_fields(o.schedule, f);
}

// A canned model's name for its task.
template <class Options>
std::string model_name(Task task) {
  return task == Task::kClassifier ? Options::kClassifierName : Options::kRegressorName;
}

// "<model> parameter <param>: <why>": the error of a param that validate() refuses.
runtime::Status param_error(const std::string& model, const std::string& param,
                            const std::string& why);

// n_classes at least 2 for a classifier, label_dimension at least 1 for a regressor.
runtime::Status check_outputs(const std::string& model, Task task, int64_t n_classes,
                              int64_t label_dimension);

// The optimizer's params (learning_rate above 0, clip_norm not negative, its schedule), by
// param_error.
runtime::Status check_optimizer(const std::string& model, const ops::Optimizer& o);

namespace params_detail {

ParamValue value_of(bool v);
ParamValue value_of(int v);
ParamValue value_of(int64_t v);
ParamValue value_of(double v);
ParamValue value_of(const std::string& v);
ParamValue value_of(const std::vector<int64_t>& v);
ParamValue value_of(const std::vector<std::string>& v);
ParamValue value_of(const std::vector<double>& v);
ParamValue value_of(const ops::Optimizer& v);
ParamValue value_of(ops::LearningRateSchedule::Kind v);

// false when the value does not convert (a string for a number, 2.5 for an integer).
bool assign(bool* field, const ParamValue& v);
bool assign(int* field, const ParamValue& v);
bool assign(int64_t* field, const ParamValue& v);
bool assign(double* field, const ParamValue& v);
bool assign(std::string* field, const ParamValue& v);
bool assign(std::vector<int64_t>* field, const ParamValue& v);
bool assign(std::vector<std::string>* field, const ParamValue& v);
bool assign(std::vector<double>* field, const ParamValue& v);
bool assign(ops::Optimizer* field, const ParamValue& v);
bool assign(ops::LearningRateSchedule::Kind* field, const ParamValue& v);

// Text in the field's own type: "64,32" for a list of integers, "true" for a flag.
bool parse(bool* field, const std::string& text);
bool parse(int* field, const std::string& text);
bool parse(int64_t* field, const std::string& text);
bool parse(double* field, const std::string& text);
bool parse(std::string* field, const std::string& text);
bool parse(std::vector<int64_t>* field, const std::string& text);
bool parse(std::vector<std::string>* field, const std::string& text);
bool parse(std::vector<double>* field, const std::string& text);
bool parse(ops::Optimizer* field, const std::string& text);
bool parse(ops::LearningRateSchedule::Kind* field, const std::string& text);

runtime::Status bad_value(const std::string& model, const std::string& name,
                          const std::string& value);
runtime::Status no_such_param(const std::string& model, const std::string& name);

}  // namespace params_detail

template <class Options>
ParamMap params_of(const Options& o, Task task) {
  ParamMap p;
  Options::fields(o, task, [&p](const char* name, const auto& field) {
    p[name] = params_detail::value_of(field);
  });
  return p;
}

// Sets the named parameters (values as ParamValue, or as text) without validating the whole:
// for a description still being put together (a command line's flags before the data has
// said how many classes there are), validated once complete. On an error `o` is left as it
// was and the error names the parameter.
template <class Options, class Values>
runtime::Status set_fields(Options& o, Task task, const Values& values, const std::string& model) {
  Options next = o;
  for (const auto& entry : values) {
    // Named, not structured bindings: a lambda may not capture those before C++20 (clang).
    const auto& name = entry.first;
    const auto& value = entry.second;
    bool found = false, converted = false;
    Options::fields(next, task, [&](const char* field_name, auto& field) {
      if (found || name != field_name) return;
      found = true;
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
        converted = params_detail::parse(&field, value);
      } else {
        converted = params_detail::assign(&field, value);
      }
    });
    if (!found) return params_detail::no_such_param(model, name);
    if (!converted) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
        return params_detail::bad_value(model, name, value);
      } else {
        return params_detail::bad_value(model, name, to_text(value));
      }
    }
  }
  o = std::move(next);
  return runtime::ok_status();
}

// set_fields, then validates the result; on an error `o` is left as it was.
template <class Options, class Values>
runtime::Status assign_params(Options& o, Task task, const Values& values,
                              const std::string& model) {
  Options next = o;
  TROUPE_RETURN_IF_ERROR(set_fields(next, task, values, model));
  TROUPE_RETURN_IF_ERROR(next.validate(task));
  o = std::move(next);
  return runtime::ok_status();
}

}  // namespace troupe::estimators
