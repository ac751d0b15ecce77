// tf.io.parse_example, parse_sequence_example and tf.placeholder_with_default as graph ops: a
// batch of serialized tf.Example protos (a string vector) into one tensor per FixedLen feature
// and a sparse tensor per VarLen one, in the graph, so that an export can take what TF
// Serving's :classify and :regress send (TF's build_parsing_serving_input_receiver_fn); and
// tf.train.SequenceExample protos into their context features and feature lists.
//
//   Output serialized = placeholder(b, DType::kString, Shape{-1}, "input_example_tensor");
//   ParsedExamples f = parse_example(b, serialized, spec);      // runtime/example.h's spec
//   Output x = placeholder_with_default(b, f.dense["x"], Shape{-1, 4}, "x");  // fed or parsed
//   ParsedSequences s = parse_single_sequence_example(b, one_proto, spec);  // s.sequences["w"]
//
// A missing FixedLen feature without a default, a value of another kind or size, and bytes
// that are no tf.Example are the step's error, naming the example and the feature. Neither
// ParseExample nor its outputs have a gradient. Not thread-safe (builders).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ops/builder_names.h"
#include "ops/sparse_ops.h"
#include "runtime/example.h"

namespace troupe::ops {

struct ParsedExamples {
  std::map<std::string, Output> dense;         // FixedLen features: [batch, shape...]
  std::map<std::string, SparseOutput> sparse;  // VarLen: [batch, longest]; kSparse: [batch, size]
};

// One ParseExample node for every feature of `spec` (FixedLen, VarLen or kSparse: TF's
// SparseFeature; a sequence feature is an error of the builder). `serialized`: string [batch].
ParsedExamples parse_example(GraphBuilder& b, Output serialized, const runtime::FeatureSpecs& spec,
                             const std::string& name = "ParseExample");

struct ParsedSequences {
  std::map<std::string, Output> context;    // FixedLen context features: [batch, shape...]
  std::map<std::string, Output> sequences;  // feature lists: [batch, longest, step...], zeros after
  std::map<std::string, Output> lengths;    // int64 [batch]: each example's steps of the list
};
// tf.io.parse_sequence_example: `serialized` (string [batch]) with `spec`'s FixedLen context
// features and kSequence feature lists (a VarLen feature is an error of the builder); each
// feature list padded to the longest in the batch.
ParsedSequences parse_sequence_example(GraphBuilder& b, Output serialized,
                                       const runtime::FeatureSpecs& spec,
                                       const std::string& name = "ParseSequenceExample");
// tf.io.parse_single_sequence_example: one proto (a string scalar); the context [shape...],
// each feature list [steps, step...], its length a scalar.
ParsedSequences parse_single_sequence_example(GraphBuilder& b, Output serialized,
                                              const runtime::FeatureSpecs& spec,
                                              const std::string& name = "ParseSequenceExample");

// Shapes as the parsing ops keep them in one attribute (each one's rank, then its dims),
// read back: `count` of them, or the error.
runtime::Result<std::vector<Shape>> shapes_attr(const std::vector<int64_t>& flat, int64_t count);

// `input` unless the output is fed, of `shape` (-1 where it varies): a placeholder that needs
// no feed. The input's nodes do not run when it is fed.
Output placeholder_with_default(GraphBuilder& b, Output input, const Shape& shape,
                                const std::string& name = "PlaceholderWithDefault");

}  // namespace troupe::ops
