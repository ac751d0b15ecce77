#include "estimators/canned/params.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace troupe::estimators {

using ops::Optimizer;

namespace {

// The shortest text that reads back the same double: 0.001 stays 0.001, 1e4 is 10000.
std::string double_text(double d) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, d).ptr;
  return std::string(buf, end);
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + double_text(v[i]);
  return s;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) parts.push_back(part);
  return parts;
}

// A list of words as text: comma-separated, a comma or backslash inside a word escaped with a
// backslash, so that any word (a class named "a,b") reads back as it was.
std::string join_words(const std::vector<std::string>& words) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) text += ',';
    for (char c : words[i]) {
      if (c == ',' || c == '\\') text += '\\';
      text += c;
    }
  }
  return text;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      words.back() += text[++i];
    } else if (text[i] == ',') {
      words.emplace_back();
    } else {
      words.back() += text[i];
    }
  }
  return words;
}

}  // namespace

std::string to_text(const ParamValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return double_text(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& v) const { return join(v); }
    std::string operator()(const std::vector<std::string>& v) const { return join_words(v); }
    std::string operator()(const std::vector<double>& v) const { return join(v); }
  };
  return std::visit(Visitor{}, v);
}

TextParams to_text(const ParamMap& p) {
  TextParams text;
  for (const auto& [k, v] : p) text[k] = to_text(v);
  return text;
}

bool parse_like(const ParamValue& like, const std::string& text, ParamValue* out) {
  return std::visit(
      [&](const auto& kind) {
        std::decay_t<decltype(kind)> v;
        if (!params_detail::parse(&v, text)) return false;
        *out = v;
        return true;
      },
      like);
}

std::string optimizer_key(const Optimizer& o) {
  switch (o.kind) {
    case Optimizer::Kind::kSgd:
      return "sgd";
    case Optimizer::Kind::kMomentum:
      return "momentum";
    case Optimizer::Kind::kAdagrad:
      return "adagrad";
    case Optimizer::Kind::kAdam:
      return "adam";
    case Optimizer::Kind::kRmsProp:
      return "rmsprop";
    case Optimizer::Kind::kFtrl:
      return "ftrl";
  }
  return "sgd";
}

runtime::Result<Optimizer> optimizer_named(const std::string& name, const Optimizer& from) {
  const double lr = from.learning_rate;
  Optimizer o;
  if (name == "adam") {
    o = Optimizer::adam(lr);
  } else if (name == "sgd") {
    o = Optimizer::sgd(lr);
  } else if (name == "momentum") {
    o = Optimizer::momentum_sgd(lr, 0.9);
  } else if (name == "adagrad") {
    o = Optimizer::adagrad(lr);
  } else if (name == "rmsprop") {
    o = Optimizer::rmsprop(lr);
  } else if (name == "ftrl") {
    o = Optimizer::ftrl(lr, from.l1, from.l2);
  } else {
    return runtime::invalid_argument("optimizer '", name,
                                     "' is not adam, sgd, momentum, adagrad, rmsprop or ftrl");
  }
  o.clip_norm = from.clip_norm;
  o.schedule = from.schedule;
  return o;
}

runtime::Status param_error(const std::string& model, const std::string& param,
                            const std::string& why) {
  return runtime::invalid_argument(model, " parameter ", param, ": ", why);
}

runtime::Status check_outputs(const std::string& model, Task task, int64_t n_classes,
                              int64_t label_dimension) {
  if (task == Task::kClassifier && n_classes < 2) return param_error(model, "n_classes", "below 2");
  if (task == Task::kRegressor && label_dimension < 1) {
    return param_error(model, "label_dimension", "below 1");
  }
  return runtime::ok_status();
}

runtime::Status check_optimizer(const std::string& model, const ops::Optimizer& o) {
  if (!(o.learning_rate > 0)) return param_error(model, "learning_rate", "not above 0");
  if (!(o.clip_norm >= 0)) return param_error(model, "clip_norm", "negative");
  if (auto s = ops::validate(o.schedule); !s.ok()) {
    return param_error(model, "lr_schedule", s.message());
  }
  return runtime::ok_status();
}

namespace params_detail {

ParamValue value_of(bool v) { return v; }
ParamValue value_of(int v) { return int64_t{v}; }
ParamValue value_of(int64_t v) { return v; }
ParamValue value_of(double v) { return v; }
ParamValue value_of(const std::string& v) { return v; }
ParamValue value_of(const std::vector<int64_t>& v) { return v; }
ParamValue value_of(const std::vector<std::string>& v) { return v; }
ParamValue value_of(const std::vector<double>& v) { return v; }
ParamValue value_of(const Optimizer& v) { return optimizer_key(v); }
ParamValue value_of(ops::LearningRateSchedule::Kind v) { return ops::schedule_name(v); }

bool assign(bool* field, const ParamValue& v) {
  if (!std::holds_alternative<bool>(v)) return false;
  *field = std::get<bool>(v);
  return true;
}

bool assign(int64_t* field, const ParamValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    *field = *i;
    return true;
  }
  // A whole double (a grid written 1e3) is an integer too.
  if (const auto* d = std::get_if<double>(&v)) {
    if (std::floor(*d) != *d || std::abs(*d) > 9e15) return false;
    *field = static_cast<int64_t>(*d);
    return true;
  }
  return false;
}

bool assign(int* field, const ParamValue& v) {
  int64_t wide = 0;
  if (!assign(&wide, v) || wide < std::numeric_limits<int>::min() ||
      wide > std::numeric_limits<int>::max()) {
    return false;
  }
  *field = static_cast<int>(wide);
  return true;
}

bool assign(double* field, const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) {
    *field = *d;
    return true;
  }
  if (const auto* i = std::get_if<int64_t>(&v)) {
    *field = static_cast<double>(*i);
    return true;
  }
  return false;
}

bool assign(std::string* field, const ParamValue& v) {
  if (!std::holds_alternative<std::string>(v)) return false;
  *field = std::get<std::string>(v);
  return true;
}

bool assign(std::vector<int64_t>* field, const ParamValue& v) {
  if (const auto* list = std::get_if<std::vector<int64_t>>(&v)) {
    *field = *list;
    return true;
  }
  int64_t one = 0;
  if (!assign(&one, v)) return false;
  *field = {one};
  return true;
}

bool assign(std::vector<std::string>* field, const ParamValue& v) {
  if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
    *field = *list;
    return true;
  }
  if (const auto* one = std::get_if<std::string>(&v)) {
    *field = {*one};
    return true;
  }
  return false;
}

bool assign(std::vector<double>* field, const ParamValue& v) {
  if (const auto* list = std::get_if<std::vector<double>>(&v)) {
    *field = *list;
    return true;
  }
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    *field = std::vector<double>(ints->begin(), ints->end());
    return true;
  }
  double one = 0;
  if (!assign(&one, v)) return false;
  *field = {one};
  return true;
}

bool assign(ops::LearningRateSchedule::Kind* field, const ParamValue& v) {
  const auto* name = std::get_if<std::string>(&v);
  if (!name) return false;
  auto kind = ops::schedule_kind(*name);
  if (!kind.ok()) return false;
  *field = *kind;
  return true;
}

bool assign(Optimizer* field, const ParamValue& v) {
  const auto* name = std::get_if<std::string>(&v);
  if (!name) return false;
  auto o = optimizer_named(*name, *field);
  if (!o.ok()) return false;
  *field = *o;
  return true;
}

bool parse(bool* field, const std::string& text) {
  if (text == "true" || text == "1") {
    *field = true;
  } else if (text == "false" || text == "0") {
    *field = false;
  } else {
    return false;
  }
  return true;
}

bool parse(int64_t* field, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) return false;
  *field = v;
  return true;
}

bool parse(int* field, const std::string& text) {
  int64_t wide = 0;
  return parse(&wide, text) && assign(field, ParamValue{wide});
}

bool parse(double* field, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) return false;
  *field = v;
  return true;
}

bool parse(std::string* field, const std::string& text) {
  *field = text;
  return true;
}

namespace {

// Comma-separated values, each as parse reads one.
template <class T>
bool parse_list(std::vector<T>* field, const std::string& text) {
  std::vector<T> values;
  for (const std::string& part : split(text)) {
    T v{};
    if (!parse(&v, part)) return false;
    values.push_back(v);
  }
  *field = std::move(values);
  return true;
}

}  // namespace

bool parse(std::vector<int64_t>* field, const std::string& text) { return parse_list(field, text); }

bool parse(std::vector<std::string>* field, const std::string& text) {
  std::vector<std::string> values;
  for (const std::string& part : split_words(text)) {
    if (!part.empty()) values.push_back(part);
  }
  *field = std::move(values);
  return true;
}

bool parse(std::vector<double>* field, const std::string& text) { return parse_list(field, text); }

bool parse(Optimizer* field, const std::string& text) { return assign(field, ParamValue{text}); }

bool parse(ops::LearningRateSchedule::Kind* field, const std::string& text) {
  return assign(field, ParamValue{text});
}

runtime::Status bad_value(const std::string& model, const std::string& name,
                          const std::string& value) {
  return param_error(model, name, "'" + value + "' is not valid");
}

runtime::Status no_such_param(const std::string& model, const std::string& name) {
  return runtime::invalid_argument(model, " has no parameter '", name, "'");
}

}  // namespace params_detail
}  // namespace troupe::estimators
