// The runtime's names every op builder (ops/*.h) speaks, as ops:: names: a builder takes the
// GraphBuilder and returns Outputs, and its tensors have DTypes and Shapes.
//
//   #include "ops/builder_names.h"
//   namespace troupe::ops {
//   Output relu(GraphBuilder& b, Output x);   // not runtime::GraphBuilder, runtime::Output
//   }
#pragma once

#include "runtime/graph_builder.h"

namespace troupe::ops {

using runtime::DType;
using runtime::GraphBuilder;
using runtime::Output;
using runtime::Shape;

}  // namespace troupe::ops
