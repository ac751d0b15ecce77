// The runtime's names an op's definition (a TROUPE_REGISTER_OP block in ops/*.cc) speaks, as
// ops:: names: its shape function's InferenceContext and Status, its gradient's Node and Grads,
// its attributes' AttrMap. For the .cc files of ops/ alone; builders' headers take
// ops/builder_names.h.
//
//   #include "ops/op_def_names.h"
//   namespace troupe::ops {
//   TROUPE_REGISTER_OP(Cube)
//       .shape_fn([](InferenceContext& c) -> Status { ... })
//       .gradient([](GraphBuilder& b, const Node& n, const Grads& dy) { ... });
//   }
#pragma once

#include <vector>

#include "ops/builder_names.h"
#include "runtime/attr.h"
#include "runtime/graph.h"
#include "runtime/op_registry.h"
#include "runtime/status.h"

namespace troupe::ops {

using runtime::AttrMap;
using runtime::InferenceContext;
using runtime::Node;
using runtime::Status;
using Grads = std::vector<Output>;  // one gradient per input, or per output

}  // namespace troupe::ops
