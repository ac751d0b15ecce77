// Training: optimizer update rules applied to variables in their store (SGD, Momentum/Nesterov,
// Adagrad, Adam, RMSProp, FTRL), minimize() and clip_by_global_norm; an optimizer's rate
// follows its schedule (ops/learning_rate_schedule.h) over the global step.
//
//   Optimizer opt = Optimizer::adam(1e-3);
//   opt.schedule = {.kind = LearningRateSchedule::Kind::kCosine, .decay_steps = 10000};
//   int train = minimize(b, loss, opt);            // a run target; increments global_step
//
// A variable read only through Gather (an embedding, the weights of categorical ids) gets its
// gradient as rows (IndexedSlices) and SparseApply* updates just those rows and their slots, so
// a step costs the rows it touches, not the variable's size.
// Update rules follow TensorFlow's Apply* ops exactly (the formulas are in training_ops.cc).
// Slots (momentum, Adam's m and v, ...) live in the store as "<var>/<slot>". Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "ops/learning_rate_schedule.h"

namespace troupe::ops {

struct Optimizer {
  enum class Kind { kSgd, kMomentum, kAdagrad, kAdam, kRmsProp, kFtrl };
  Kind kind = Kind::kSgd;
  double learning_rate = 0.01;
  Output learning_rate_tensor;        // a float rate tensor; overrides learning_rate when valid
  LearningRateSchedule schedule;      // applied to the rate, whichever gives it
  double momentum = 0.0;              // Momentum, RMSProp
  bool nesterov = false;              // Momentum
  double beta1 = 0.9, beta2 = 0.999;  // Adam
  double epsilon = 1e-7;              // Adam, Adagrad, RMSProp
  double decay = 0.9;                 // RMSProp
  bool centered = false;              // RMSProp
  double initial_accumulator_value = 0.1;  // Adagrad, FTRL
  double l1 = 0, l2 = 0, lr_power = -0.5;  // FTRL
  double clip_norm = 0;                    // > 0: gradients are clipped by their global norm first

  static Optimizer sgd(double lr);
  static Optimizer momentum_sgd(double lr, double momentum, bool nesterov = false);
  static Optimizer adagrad(double lr);
  static Optimizer adam(double lr = 1e-3);
  static Optimizer rmsprop(double lr = 1e-3);
  static Optimizer ftrl(double lr, double l1 = 0, double l2 = 0);
  std::string name() const;
};

// A gradient as rows of a variable (TF's IndexedSlices): values holds one row (the variable's
// elements past dimension 0) per index; rows named twice add up.
struct IndexedSlices {
  Output values;
  Output indices;
  bool valid() const { return values.valid() && indices.valid(); }
};
// The rows of `grad` when it is the gradient of Gathers along axis 0 from variable node `var`
// (an embedding or a linear model's weights over categorical ids); invalid otherwise.
IndexedSlices indexed_slices_of(GraphBuilder& b, Output grad, int var);

// Builds d(loss)/d(vars) and the update of each variable, then the increment of global_step;
// returns the NoOp to run as the training target. `vars` defaults to every trainable variable.
// A gradient that is rows of its variable (indexed_slices_of) updates those rows only.
int minimize(GraphBuilder& b, Output loss, const Optimizer& opt, std::vector<int> vars = {});
// Several optimizers, each over its own variables (wide & deep: FTRL for the linear part,
// Adagrad for the DNN), in one step: one backward pass, one increment of global_step.
struct OptimizerPart {
  Optimizer optimizer;
  std::vector<int> vars;  // empty: every trainable variable
};
int minimize(GraphBuilder& b, Output loss, const std::vector<OptimizerPart>& parts);
// Applies already computed `grads` (one per variable node in `vars`; invalid ones are skipped).
int apply_gradients(GraphBuilder& b, const std::vector<Output>& grads, const std::vector<int>& vars,
                    const Optimizer& opt);

// Synchronous replicas (TF's SyncReplicasOptimizer): a target that runs after `train_op` and,
// on a cluster's ps, waits until the global step has passed `global_step`, its read at the
// start of the step. A replica's updates wait for their rounds already (the Estimator's steps
// need no barrier); this is for a step that makes none beside the global step. Returns the node
// to run as train op.
int sync_replicas_barrier(GraphBuilder& b, Output global_step, int train_op);
// Synchronous replicas: every update built so far (outside control flow) waits for the step's
// read of the global step, whose value its call carries as its round on every ps
// (actors/sync_stamp.h), as TF's SyncReplicasOptimizer hands its accumulators the local step.
// The Estimator does this for --sync; a graph run by sessions of its own calls it once built.
// Nothing to do in a graph without a global step; an error when an update was built before it
// (build it first, as the Estimator does).
runtime::Status stamp_updates(GraphBuilder& b);

// t_i * clip_norm / max(global_norm, clip_norm), with global_norm = sqrt(sum ||t_i||^2).
// Returns the clipped tensors followed by the global norm.
std::vector<Output> clip_by_global_norm(GraphBuilder& b, const std::vector<Output>& tensors,
                                        double clip_norm);

}  // namespace troupe::ops
