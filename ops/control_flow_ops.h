// Control flow in the graph, as TF 1.x has it: the dataflow primitives Switch, Merge, Enter,
// Exit, NextIteration and LoopCond, and the builders made of them, cond, case_ and while_loop.
//
//   std::vector<Output> r = cond(b, less(b, x, y),
//       [&](GraphBuilder& b) { return std::vector<Output>{add(b, x, z)}; },   // pred true
//       [&](GraphBuilder& b) { return std::vector<Output>{square(b, y)}; });  // pred false
//   std::vector<Output> v = while_loop(b,
//       [](GraphBuilder& b, const std::vector<Output>& v) { return less(b, v[0], 10); },
//       [](GraphBuilder& b, const std::vector<Output>& v) {
//         return std::vector<Output>{add(b, v[0], 1), mul(b, v[1], 2.0)};
//       },
//       {i0, x0});                                    // v: i and x after the last iteration
//
// A branch not taken gets dead tensors and computes nothing: a Switch sends its input down the
// branch its predicate picks and a dead tensor down the other; a node with a dead input is
// dead itself, and a Merge forwards whichever of its inputs is live. A loop runs in a frame of
// its own: Enter takes a value into it, NextIteration to the next iteration, Exit out of it once
// LoopCond says false; frames nest. A value from outside that a branch or a body uses enters
// through a Switch or an Enter the builder adds (GraphBuilder's control-flow contexts).
// Executed by runtime::Executor, and on actors as regions (actors/control_flow_region.h).
//
// Gradients (runtime/gradients.h): a cond's flows through the branch taken. A loop's is a second
// loop (while_loop.cc) that runs as many iterations as the first did, each differentiating the
// body backwards, with the forward values it reads popped from stacks that every forward
// iteration pushed them on (StackPush, StackPop); an outer value the body read gets the sum over
// the iterations. Nested loops differentiate inside out. A cond inside a loop's body is
// differentiated in a cond of the gradient's loop, steered by the predicate each forward
// iteration took (pushed on a stack too); the values its branch pushed, it pops only in the
// iterations that branch ran.
//
// Not thread-safe (builders).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops/builder_names.h"

namespace troupe::ops {

// (output_false, output_true): `data` on the output `pred` (a bool scalar) picks.
std::pair<Output, Output> switch_(GraphBuilder& b, Output data, Output pred,
                                  const std::string& name = "");
// (output, value_index): the first live input, and which it was (int32).
std::pair<Output, Output> merge(GraphBuilder& b, const std::vector<Output>& inputs,
                                const std::string& name = "");
// `data` in frame `frame` (a child of the frame it comes from): at the first iteration, or,
// is_constant, at every iteration (a value the body reads but does not change).
Output enter(GraphBuilder& b, Output data, const std::string& frame, bool is_constant = false,
             int64_t parallel_iterations = 10, const std::string& name = "");
// `data` back in the enclosing frame.
Output exit(GraphBuilder& b, Output data, const std::string& name = "");
// `data` at the next iteration of its frame.
Output next_iteration(GraphBuilder& b, Output data, const std::string& name = "");
// `pred` as the loop's condition: what each loop variable's Switch is steered by.
Output loop_cond(GraphBuilder& b, Output pred, const std::string& name = "");
// A node that runs once `deps` have, whether they ran or were dead, and is never dead: its id.
int control_trigger(GraphBuilder& b, const std::vector<int>& deps, const std::string& name = "");

using BranchFn = std::function<std::vector<Output>(GraphBuilder&)>;

// tf.cond: then_fn's outputs when `pred` (a bool scalar) is true, else_fn's when false. Only
// the branch taken runs. The branches must return as many outputs, of the same dtypes; a shape
// where they differ is unknown.
std::vector<Output> cond(GraphBuilder& b, Output pred, const BranchFn& then_fn,
                         const BranchFn& else_fn, const std::string& name = "cond");

// tf.case (case is a C++ keyword): the branch of the first predicate that is true, else
// `default_fn`'s. Built as nested conds, so only that branch runs.
std::vector<Output> case_(GraphBuilder& b, const std::vector<std::pair<Output, BranchFn>>& pairs,
                          const BranchFn& default_fn, const std::string& name = "case");

struct WhileOptions {
  // At most this many iterations (-1: no bound), as TF's maximum_iterations: a counter the
  // condition also checks.
  int64_t maximum_iterations = -1;
  // Iterations that may run at the same time (those that do not depend on each other).
  int64_t parallel_iterations = 10;
  // Lets the gradient's stacks of forward values leave the fast memory (taken, not yet used).
  bool swap_memory = false;
  // A shape each loop variable keeps from iteration to iteration; empty: its initial shape.
  // Unknown dimensions let the body change them.
  std::vector<Shape> shape_invariants;
};

using LoopCondFn = std::function<Output(GraphBuilder&, const std::vector<Output>&)>;
using LoopBodyFn = std::function<std::vector<Output>(GraphBuilder&, const std::vector<Output>&)>;

// tf.while_loop: runs `body` on the loop variables while `cond` (a bool scalar of them) is
// true; returns the variables after the last iteration. The body returns as many values as it
// takes, each of the variable's dtype and of a shape its invariant allows: else the error names
// the loop and the variable.
std::vector<Output> while_loop(GraphBuilder& b, const LoopCondFn& cond, const LoopBodyFn& body,
                               const std::vector<Output>& loop_vars,
                               const WhileOptions& options = {}, const std::string& name = "while");

}  // namespace troupe::ops
