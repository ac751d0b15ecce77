// Symbolic differentiation, as tf.gradients: adds the nodes that compute d(sum ys)/d(xs) to the
// graph, walking back from ys and calling each op's gradient function (ops/ defines them next to
// the ops). Broadcasting is undone inside those functions; StopGradient and ops marked
// no_gradient pass nothing back.
//
//   Output loss = ...;
//   std::vector<Output> g = gradients(b, {loss}, {w, bias});   // dloss/dw, dloss/dbias
//   if (!g[0].valid()) { /* loss does not depend on w */ }
//
// grad_ys (one per y, optional) weights each y; the default is ones shaped like y.
// An op without a gradient function on the path is an error kept in the builder's status.
#pragma once

#include <vector>

#include "runtime/graph_builder.h"

namespace troupe::runtime {

std::vector<Output> gradients(GraphBuilder& b, const std::vector<Output>& ys,
                              const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys = {});

// gradients() of a while loop's body, for the loop that runs it backwards (ops/control_flow_ops):
// the nodes of context `body` get their gradients in the builder's current context, where the
// forward values they read come from the stacks the forward loop pushed them on.
std::vector<Output> body_gradients(GraphBuilder& b, const std::vector<Output>& ys,
                                   const std::vector<Output>& xs,
                                   const std::vector<Output>& grad_ys, int body);

}  // namespace troupe::runtime
