// troupe's common API in one include, for programs that build, train and serve models:
// tensors and graphs, the ops, sessions of node actors, Estimator and Experiment with their
// input pipelines, hooks and metrics, the canned models (DNN, linear, wide & deep, k-means, tree
// ensembles) with scikit-learn's model selection and pipelines, and loading exports.
//
//   #include <troupe/troupe.h>
//
//   troupe::runtime::Graph g;
//   troupe::runtime::GraphBuilder b(&g);
//   auto x = troupe::ops::placeholder(b, troupe::runtime::DType::kFloat32, {-1, 4}, "x");
//   ...
//   troupe::estimators::DNNClassifier clf({.hidden_units = {16}, .n_classes = 3});
//   auto predictor = troupe::serving::load("exports/1733100000");
//
// Build against an installed troupe with CMake (find_package(troupe) and troupe::troupe) or
// pkg-config (troupe.pc); README.md says how. Headers outside this list (wire codecs, input file
// readers) are installed too, each included by its own path.
#pragma once

#include "runtime/checkpoint.h"
#include "runtime/dtype.h"
#include "runtime/graph.h"
#include "runtime/graph_builder.h"
#include "runtime/shape.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

#include "ops/array_ops.h"
#include "ops/conv_ops.h"
#include "ops/feature_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/random_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"

#include "actors/runtime_system.h"
#include "actors/session.h"

#include "estimators/canned/dnn.h"
#include "estimators/canned/kmeans.h"
#include "estimators/canned/linear.h"
#include "estimators/canned/trees.h"
#include "estimators/canned/wide_deep.h"
#include "estimators/estimator.h"
#include "estimators/experiment.h"
#include "estimators/export/batcher.h"
#include "estimators/export/predictor.h"
#include "estimators/export/saved_model.h"
#include "estimators/hooks.h"
#include "estimators/input/dataset.h"
#include "estimators/metrics.h"
#include "estimators/model_fn.h"
#include "estimators/run_config.h"
#include "estimators/selection/model_selection.h"
#include "estimators/selection/pipeline.h"
