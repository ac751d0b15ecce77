#include "runtime/variable_store.h"

#include <doctest/doctest.h>

using namespace troupe::runtime;

TEST_CASE("variable store: read, update in place unless a reader holds the value") {
  VariableStore vars;
  CHECK_FALSE(vars.read("w").ok());
  vars.assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  Tensor reader = *vars.read("w");
  Tensor u = *vars.for_update("w", DType::kFloat32,
                              Shape{2});  // a reader holds the old buffer: copy first
  CHECK_FALSE(u.shares_buffer_with(reader));
  u.data<float>()[0] = 5;
  CHECK(reader.data<float>()[0] == 1);
  CHECK(vars.read("w")->data<float>()[0] == 5);
  reader = Tensor();
  u = Tensor();
  Tensor before = *vars.for_update("w", DType::kFloat32, Shape{2});
  Tensor again = *vars.for_update("w", DType::kFloat32,
                                  Shape{2});  // nobody else holds it now... but `before` does
  CHECK_FALSE(again.shares_buffer_with(before));
}

TEST_CASE("slots are created once, shaped like their variable or as asked") {
  VariableStore vars;
  vars.assign("w", Tensor::from_vector<double>(Shape{3}, {1, 2, 3}));
  Tensor m = *vars.slot("w", "m", 0.5);
  CHECK(m.shape() == Shape{3});
  CHECK(m.data<double>()[2] == 0.5);
  m.data<double>()[2] = 7;
  m = Tensor();
  CHECK(vars.slot("w", "m")->data<double>()[2] == 7);
  Shape scalar;
  CHECK(vars.slot("w", "t", 0, &scalar)->shape() == Shape{});
  CHECK_FALSE(vars.slot("missing", "m").ok());
  CHECK(vars.names().size() == 3);
}

TEST_CASE("an update through another dtype or shape than the stored value's is refused") {
  VariableStore vars;
  vars.assign("w", Tensor::from_vector<float>(Shape{2}, {1, 2}));
  Result<Tensor> wrong_type = vars.for_update("w", DType::kFloat64, Shape{2});
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.status().message().find("'w' holds float32[2]") != std::string::npos);
  CHECK_FALSE(vars.for_update("w", DType::kFloat32, Shape{3}).ok());
  CHECK(vars.read("w")->to_vector<float>() == std::vector<float>{1, 2});
}

TEST_CASE("a slot whose stored value is not shaped as its variable is refused, by name") {
  VariableStore vars;
  vars.assign("w", Tensor::from_vector<float>(Shape{3}, {1, 2, 3}));
  // As a checkpoint of another model, or a peer, could leave it.
  vars.assign("w/m", Tensor::from_vector<float>(Shape{1}, {0}));
  Result<Tensor> m = vars.slot("w", "m");
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().find("'w/m'") != std::string::npos);
  vars.assign("w/v", Tensor::from_vector<double>(Shape{3}, {0, 0, 0}));
  CHECK_FALSE(vars.slot("w", "v").ok());
}

TEST_CASE("an int64 scalar is read only when it is one") {
  VariableStore vars;
  CHECK_FALSE(vars.read_int64_scalar("global_step").has_value());
  vars.assign("global_step", Tensor::scalar<float>(3));  // as an unchecked load could leave it
  CHECK_FALSE(vars.read_int64_scalar("global_step").has_value());
  vars.assign("global_step", Tensor::scalar<int64_t>(42));
  CHECK(vars.read_int64_scalar("global_step") == 42);
}

TEST_CASE("a local variable is read and updated as any, but not among the names saved") {
  VariableStore vars;
  vars.assign("w", Tensor::from_vector<float>(Shape{1}, {1}));
  vars.assign_local("metrics/acc/count", Tensor::from_vector<double>(Shape{}, {0}));
  CHECK(vars.names() == std::vector<std::string>{"w"});
  CHECK(vars.contains("metrics/acc/count"));
  auto count = vars.for_update("metrics/acc/count", DType::kFloat64, Shape{});
  REQUIRE(count.ok());
  count->data<double>()[0] = 3;
  CHECK(vars.read("metrics/acc/count")->data<double>()[0] == 3);
  vars.clear();
  CHECK_FALSE(vars.contains("metrics/acc/count"));
}
