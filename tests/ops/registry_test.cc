// Self-test of the registries: every op has a CPU kernel, a gradient or says it has none, and
// documentation; every kernel belongs to a registered op.
#include <doctest/doctest.h>

#include <set>

#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

using namespace troupe::runtime;

TEST_CASE("every op has a CPU kernel, a gradient or no_gradient, and a doc") {
  auto ops = registered_ops();
  CHECK(ops.size() > 100);
  for (const OpDef* op : ops) {
    INFO("op ", op->name);
    CHECK(kernel_registry().has_any(op->name, DeviceType::kCpu));
    CHECK((op->grad_fn != nullptr) != op->no_gradient);
    CHECK_FALSE(op->doc.empty());
    CHECK(op->shape_fn != nullptr);
  }
}

TEST_CASE("every op that names a variable says whether it reads or writes it") {
  // Sessions order variable reads after earlier steps' writes by this flag; an op that touches a
  // variable without declaring it would race with pipelined steps.
  int readers = 0, writers = 0;
  for (const OpDef* op : registered_ops()) {
    INFO("op ", op->name);
    const bool names_var = op->attr_defaults.count("var") > 0;
    CHECK(names_var == (op->variable_access != VariableAccess::kNone));
    readers += op->variable_access == VariableAccess::kRead;
    writers += op->variable_access == VariableAccess::kWrite;
  }
  CHECK(readers == 3);  // Variable, ReadVariable, VariableGather
  // Assign, AssignAdd, AssignSub, six Apply*, six SparseApply*, BucketBoundaries, GrowTreeLayer,
  // seven Scatter*
  CHECK(writers == 24);
}

TEST_CASE("every kernel names a registered op, once per (op, device, dtype)") {
  std::set<std::tuple<std::string, int, int>> seen;
  for (const auto& e : kernel_registry().entries()) {
    INFO("kernel ", e.op);
    CHECK(find_op(e.op) != nullptr);
    CHECK(seen.insert({e.op, int(e.device), int(e.dtype)}).second);
  }
}
