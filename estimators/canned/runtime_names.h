// The runtime's names the canned models' .cc files speak, as estimators:: names: graphs of
// Outputs with DTypes and Shapes, Tensors of data, and errors as Status and Result. For the .cc
// files of estimators/canned/ alone; headers spell runtime:: out.
//
//   #include "estimators/canned/runtime_names.h"
//   namespace troupe::estimators {
//   Result<Output> logits(ModelInputs& in);   // runtime::Result<runtime::Output>
//   }
#pragma once

#include "runtime/graph_builder.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::estimators {

using runtime::DType;
using runtime::Output;
using runtime::Result;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

}  // namespace troupe::estimators
