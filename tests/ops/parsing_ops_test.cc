// ParseExample and PlaceholderWithDefault in a graph: FixedLen features with and without
// defaults, VarLen features as sparse outputs, the graph codec keeping the attributes, bytes
// that are no tf.Example or a feature of the wrong kind named in the step's error, and a
// placeholder_with_default that is fed (its input not run) or not.
#include "ops/parsing_ops.h"

#include <doctest/doctest.h>

#include "harness/op_harness.h"
#include "ops/math_ops.h"
#include "runtime/graph_codec.h"

using namespace troupe;
using namespace troupe::runtime;
using testing::OpTest;

namespace {

// Three examples: x (float [2]) in each, k (int64) in the first two, tags (strings) of 2, 0
// and 1 values.
Tensor three_examples() {
  Tensor serialized(DType::kString, Shape{3});
  const Tensor x = Tensor::from_vector(Shape{3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const std::vector<std::vector<std::string>> tags{{"a", "b"}, {}, {"c"}};
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<std::string> n{"x", "tags"};
    std::vector<Tensor> cols{x, Tensor::from_vector(Shape{3, static_cast<int64_t>(tags[r].size())},
                                                    std::vector<std::string>(3 * tags[r].size()))};
    for (size_t j = 0; j < tags[r].size(); ++j) {
      cols[1].data<std::string>()[r * static_cast<int64_t>(tags[r].size()) + j] = tags[r][j];
    }
    if (r < 2) {
      n.push_back("k");
      cols.push_back(Tensor::from_vector(Shape{3}, std::vector<int64_t>{10, 20, 30}));
    }
    REQUIRE(encode_example(n, cols, r, &serialized.data<std::string>()[r]).ok());
  }
  return serialized;
}

FeatureSpecs spec_with_default() {
  return {{"x", {.dtype = DType::kFloat32, .shape = Shape{2}}},
          {"k", {.dtype = DType::kInt64, .default_value = Tensor::scalar<int64_t>(-1)}},
          {"tags", {.kind = FeatureSpec::Kind::kVarLen, .dtype = DType::kString}}};
}

}  // namespace

TEST_CASE("ParseExample: FixedLen features, a default for the missing, VarLen as sparse") {
  OpTest t;
  ops::ParsedExamples f = ops::parse_example(t.b, t.feed(three_examples()), spec_with_default());
  REQUIRE(t.b.ok());
  CHECK(t.g.shape(f.dense["x"]) == Shape{3, 2});
  CHECK(t.eval(f.dense["x"]).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(t.eval(f.dense["k"]).to_vector<int64_t>() == std::vector<int64_t>{10, 20, -1});
  const ops::SparseOutput& tags = f.sparse["tags"];
  CHECK(t.eval(tags.indices).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 2, 0});
  CHECK(t.eval(tags.values).to_vector<std::string>() == std::vector<std::string>{"a", "b", "c"});
  CHECK(t.eval(tags.dense_shape).to_vector<int64_t>() == std::vector<int64_t>{3, 2});

  // The same graph through the codec (the attributes travel) parses the same.
  std::vector<char> bytes;
  REQUIRE(encode_graph(t.g, &bytes).ok());
  Graph back;
  const Status decoded =
      decode_graph(std::make_shared<const std::vector<char>>(std::move(bytes)), &back);
  REQUIRE_MESSAGE(decoded.ok(), decoded.to_string());
  CHECK(back.node(f.dense["k"].node).op == "ParseExample");
  CHECK(attrs_equal(back.node(f.dense["k"].node).attrs, t.g.node(f.dense["k"].node).attrs));
}

TEST_CASE("ParseExample's errors name the example and the feature") {
  FeatureSpecs required = spec_with_default();
  required["k"].default_value.reset();
  OpTest t;
  auto missing = t.run({ops::parse_example(t.b, t.feed(three_examples()), required).dense["k"]});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("ParseExample") != std::string::npos);
  CHECK(missing.status().message().find("example 2") != std::string::npos);
  CHECK(missing.status().message().find("'k' is missing") != std::string::npos);

  FeatureSpecs floats = spec_with_default();
  floats["k"] = {.dtype = DType::kFloat32, .default_value = Tensor::scalar<float>(0)};
  OpTest kind;
  auto wrong =
      kind.run({ops::parse_example(kind.b, kind.feed(three_examples()), floats).dense["k"]});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("'k' is int64, not float32") != std::string::npos);

  OpTest garbage;
  Tensor bad = Tensor::from_vector(Shape{1}, std::vector<std::string>{"\xff\xff\xff"});
  auto no_example = garbage.run(
      {ops::parse_example(garbage.b, garbage.feed(bad), spec_with_default()).dense["x"]});
  REQUIRE_FALSE(no_example.ok());
  CHECK(no_example.status().message().find("example 0 is not a tf.Example") != std::string::npos);

  // A sequence feature has no place in a tf.Example: the builder says so.
  OpTest seq;
  ops::parse_example(seq.b, seq.feed(three_examples()),
                     {{"s", {.kind = FeatureSpec::Kind::kSequence, .dtype = DType::kFloat32}}});
  CHECK(seq.b.status().message().find("feature list") != std::string::npos);
}

TEST_CASE("placeholder_with_default: its default unless fed, and then its input does not run") {
  OpTest t;
  Output parsed = ops::parse_example(t.b, t.feed(three_examples()), spec_with_default()).dense["x"];
  Output x = ops::placeholder_with_default(t.b, parsed, Shape{-1, 2}, "x");
  Output y = ops::mul(t.b, x, 2.0);
  CHECK(t.eval(y).to_vector<float>() == std::vector<float>{2, 4, 6, 8, 10, 12});
  // Fed directly, the serialized input is not parsed: garbage there is no error.
  OpTest fed;
  Output bad = fed.feed(Tensor::from_vector(Shape{1}, std::vector<std::string>{"\xff"}));
  Output px = ops::placeholder_with_default(
      fed.b, ops::parse_example(fed.b, bad, spec_with_default()).dense["x"], Shape{-1, 2}, "x");
  fed.feeds.push_back({px, Tensor::from_vector(Shape{1, 2}, std::vector<float>{7, 8})});
  auto out = fed.run({ops::mul(fed.b, px, 2.0)});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  CHECK(out->at(0).to_vector<float>() == std::vector<float>{14, 16});
  // A default of another shape is the builder's error.
  OpTest wrong;
  ops::placeholder_with_default(wrong.b, wrong.feed(Tensor(DType::kFloat32, Shape{2, 3})),
                                Shape{-1, 2});
  CHECK_FALSE(wrong.b.ok());
}

TEST_CASE("a SparseFeature: values at the positions their index feature gives, rows in order") {
  // Example 0: positions 4, 1 for values 0.5, 2.5; example 1: none; example 2: position 0.
  const std::vector<std::vector<int64_t>> at{{4, 1}, {}, {0}};
  const std::vector<std::vector<float>> values{{0.5f, 2.5f}, {}, {7.f}};
  Tensor serialized(DType::kString, Shape{3});
  for (int64_t r = 0; r < 3; ++r) {
    const auto n = static_cast<int64_t>(at[r].size());
    REQUIRE(encode_example({"idx", "val"},
                           {Tensor::from_vector(Shape{1, n}, at[r]),
                            Tensor::from_vector(Shape{1, n}, values[r])},
                           0, &serialized.data<std::string>()[r])
                .ok());
  }
  const FeatureSpecs spec = {{"x",
                              {.kind = FeatureSpec::Kind::kSparse,
                               .dtype = DType::kFloat32,
                               .index_key = "idx",
                               .value_key = "val",
                               .size = 6}}};
  OpTest t;
  ops::SparseOutput x = ops::parse_example(t.b, t.feed(serialized), spec).sparse["x"];
  REQUIRE(t.b.ok());
  CHECK(t.eval(x.indices).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 4, 2, 0});
  CHECK(t.eval(x.values).to_vector<float>() == std::vector<float>{2.5f, 0.5f, 7.f});
  CHECK(t.eval(x.dense_shape).to_vector<int64_t>() == std::vector<int64_t>{3, 6});

  // A position outside [0, size) is named; so are counts that differ.
  FeatureSpecs small = spec;
  small["x"].size = 4;
  std::map<std::string, SparseTensor> out;
  std::vector<std::string_view> records;
  for (int64_t r = 0; r < 3; ++r) records.push_back(serialized.data<std::string>()[r]);
  auto beyond = parse_examples(records, small, &out);
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.status().message().find("example 0: sparse feature 'x': position 4 (value 0) is "
                                       "outside [0, 4)") != std::string::npos);
  std::string uneven;
  REQUIRE(encode_example({"idx", "val"},
                         {Tensor::from_vector(Shape{1, 1}, std::vector<int64_t>{0}),
                          Tensor::from_vector(Shape{1, 2}, std::vector<float>{1, 2})},
                         0, &uneven)
              .ok());
  auto counts = parse_examples({uneven}, spec, &out);
  REQUIRE_FALSE(counts.ok());
  CHECK(counts.status().message().find("1 positions in 'idx' for 2 values in 'val'") !=
        std::string::npos);
  // An input pipeline batches it as its two VarLen features.
  auto split = split_sparse_features(spec);
  REQUIRE(split.ok());
  CHECK(to_string(split->at("idx")) == "int64 varlen");
  CHECK(to_string(split->at("val")) == "float32 varlen");
  CHECK(split->count("x") == 0);
}
