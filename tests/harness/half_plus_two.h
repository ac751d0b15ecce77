// What troupe serve's tests serve: TF Serving's example model, half_plus_two, written as an
// export version of a base path.
//
//   write_half_plus_two(base, "123", 2.0);   // base/123 answers y = 0.5 x + 2
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "estimators/export/saved_model.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/parsing_ops.h"

namespace troupe::serve {

// TF Serving's example model, y = 0.5 x + 2, with a signature for each form the API takes.
// `offset` replaces the 2 (a second version answers differently).
inline void write_half_plus_two(const std::string& base, const std::string& version,
                                double offset) {
  serving::SavedModel m;
  runtime::GraphBuilder b(&m.graph);
  auto x = ops::placeholder(b, runtime::DType::kFloat32, runtime::Shape{-1}, "x");
  auto y = ops::add(b, ops::mul(b, x, 0.5), offset);
  auto a = ops::placeholder(b, runtime::DType::kFloat32, runtime::Shape{-1, 2}, "a");
  auto k = ops::placeholder(b, runtime::DType::kInt64, runtime::Shape{-1}, "k");
  auto s = ops::placeholder(b, runtime::DType::kString, runtime::Shape{-1}, "s");
  using serving::make_signature;
  m.signatures["serving_default"] = make_signature(m.graph, "predict", {{"x", x}}, {{"y", y}});
  m.signatures["two_outputs"] =
      make_signature(m.graph, "predict", {{"x", x}}, {{"y", y}, {"x_again", ops::identity(b, x)}});
  m.signatures["pair"] =
      make_signature(m.graph, "predict", {{"a", a}, {"k", k}},
                     {{"sum", ops::reduce_sum(b, a, {1})}, {"k", ops::identity(b, k)}});
  m.signatures["echo"] =
      make_signature(m.graph, "predict", {{"s", s}},
                     {{"s_bytes", ops::identity(b, s)}, {"text", ops::identity(b, s)}});
  // As TF Serving's half_plus_two: classify and regress parse serialized tf.Example protos.
  auto examples = ops::placeholder(b, runtime::DType::kString, runtime::Shape{-1}, "tf_example");
  auto parsed = ops::parse_example(b, examples, {{"x", {.dtype = runtime::DType::kFloat32}}});
  auto y_of_x = ops::add(b, ops::mul(b, parsed.dense["x"], 0.5), offset);
  m.signatures["classify_x_to_y"] = make_signature(m.graph, "classify", {{"inputs", examples}},
                                                   {{"scores", ops::reshape(b, y_of_x, {-1, 1})}});
  m.signatures["regression"] =
      make_signature(m.graph, "regress", {{"inputs", examples}}, {{"outputs", y_of_x}});
  // A classify signature of named inputs, which the examples' fields feed directly.
  m.signatures["classify_named"] =
      make_signature(m.graph, "classify", {{"x", x}}, {{"scores", ops::reshape(b, y, {-1, 1})}});
  m.class_labels = {"y"};
  REQUIRE(b.ok());
  const std::string tmp = base + "/tmp";
  auto dir = serving::write_saved_model(tmp, m);
  REQUIRE_MESSAGE(dir.ok(), dir.status().to_string());
  std::filesystem::rename(*dir, base + "/" + version);
  std::filesystem::remove_all(tmp);
}

}  // namespace troupe::serve
