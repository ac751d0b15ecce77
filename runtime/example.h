// tf.Example and tf.train.SequenceExample protos (schema/example.proto, TF's field numbers) as
// tensors: parsed by a feature spec, as tf.io.parse_example and parse_single_sequence_example
// do, and encoded from rows of tensors. The TFRecord reader (estimators/input), the ParseExample
// kernel and the model server's :classify and :regress all go through here.
//
//   FeatureSpecs spec = {{"image", {.dtype = DType::kFloat32, .shape = Shape{784}}},
//                        {"tags", {.kind = FeatureSpec::Kind::kVarLen, .dtype = DType::kString}}};
//   std::map<std::string, SparseTensor> var_len;
//   auto t = parse_examples(serialized, spec, &var_len);   // t[0]: [n, 784]; var_len["tags"]
//   std::string bytes;
//   TROUPE_RETURN_IF_ERROR(encode_example({"image"}, {images}, /*row=*/3, &bytes));
//
// A FixedLen feature (tf.io.FixedLenFeature) has one shape in every example, of float32, int64
// or string, and a default for an example without it; a VarLen feature (tf.io.VarLenFeature)
// is a list of any length, a sparse tensor for a batch; a kSequence feature is a
// SequenceExample's feature list, each step of `shape`, cut or padded (zeros, or "") to a
// sequence length. An Example's bytes parse as a SequenceExample whose context is its features,
// so both kinds read alike. Errors name the example and the feature. Plain functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/sparse_tensor.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::runtime {

struct FeatureSpec {
  // kSequence: a feature list of a tf.train.SequenceExample, each step of `shape`
  // (tf.io.FixedLenSequenceFeature), as a [sequence_length, shape...] tensor an example.
  // kSparse: tf.io.SparseFeature, a [batch, size] sparse tensor of the values in feature
  // `value_key`, each at the position the int64 feature `index_key` gives it (same count).
  enum class Kind { kFixedLen, kVarLen, kSequence, kSparse };
  Kind kind = Kind::kFixedLen;
  DType dtype = DType::kFloat32;        // float32, int64 or string
  Shape shape;                          // FixedLen: each example's; kSequence: a step's
  std::optional<Tensor> default_value;  // FixedLen: for an example without it
  std::string index_key, value_key;     // kSparse
  int64_t size = 0;                     // kSparse: positions are in [0, size)
};
using FeatureSpecs = std::map<std::string, FeatureSpec>;

// "float32 [784]", "int64 varlen": how errors and logs show a spec.
std::string to_string(const FeatureSpec& spec);
// A dtype tf.Example cannot hold, a shape not fully defined, a default of another dtype or
// size, or a default on a VarLen or sequence feature: the error, naming the feature.
Status check_feature_spec(const std::string& name, const FeatureSpec& spec);

// Parses serialized tf.Example protos into one tensor per feature of `spec`, in its order:
// [n, shape...] for each FixedLen feature. A VarLen feature's place holds an empty tensor and its
// [n, longest] sparse tensor goes to `var_len`, as does a kSparse one's [n, size] (positions in
// order within a row); without `var_len`, either is an error. A position outside [0, size), or
// counts of positions and values that differ, is an error naming the example and the feature.
Result<std::vector<Tensor>> parse_examples(const std::vector<std::string_view>& serialized,
                                           const FeatureSpecs& spec,
                                           std::map<std::string, SparseTensor>* var_len = nullptr);
// tf.io.parse_sequence_example: SequenceExample protos into one tensor per feature of `spec`
// (context features FixedLen, feature lists kSequence), [n, ...] each, every feature list cut
// or padded to `sequence_length` steps (0: the longest list of the batch, as TF pads one); each
// example's own number of steps goes to `lengths` when given (TF's feature_list_lengths, the
// longest list of the example), and each feature list's to `list_lengths`, by name.
Result<std::vector<Tensor>> parse_sequence_examples(
    const std::vector<std::string_view>& serialized, const FeatureSpecs& spec,
    int64_t sequence_length, std::vector<int64_t>* lengths = nullptr,
    std::map<std::string, std::vector<int64_t>>* list_lengths = nullptr);

// A spec whose kSparse features are their two VarLen features instead (index_key int64,
// value_key of the values' dtype), as an input pipeline batches them: what
// weighted_categorical_column(categorical_column_with_identity(index_key, size), value_key)
// reads. A feature named twice with two kinds is an error.
Result<FeatureSpecs> split_sparse_features(const FeatureSpecs& spec);

// For readers that fill batches of their own record by record: the tensors of `rows` examples
// ([rows, shape...], [rows, sequence_length, step...]; an empty tensor for a VarLen feature),
// and one record parsed into row `row` of them. A VarLen feature's values replace its tensor, as
// [1, count]. The record's most steps go to `steps` when given. A record that is no
// tf.Example or SequenceExample is DataLoss; one that does not fit the spec InvalidArgument.
std::vector<Tensor> example_batch(const FeatureSpecs& spec, int64_t rows, int64_t sequence_length);
Status parse_example_into(std::string_view record, const FeatureSpecs& spec,
                          int64_t sequence_length, int64_t row, std::vector<Tensor>* batch,
                          int64_t* steps = nullptr);

// What the first records say of their features: a feature every record has with n values is
// FixedLen ([] for one, [n] otherwise), any other VarLen; a feature list is kSequence. The
// most steps a feature list has goes to `most_steps`. Errors begin with `where`.
Result<FeatureSpecs> infer_feature_specs(const std::vector<std::string_view>& records,
                                         const std::string& where, int64_t* most_steps);

// Row `row` of each of `columns` ([n, ...] tensors, named by `names`) as one serialized
// tf.Example: float32 and float64 as a FloatList, integers and bools as an Int64List, strings
// as a BytesList. Another dtype is an error naming the column.
Status encode_example(const std::vector<std::string>& names, const std::vector<Tensor>& columns,
                      int64_t row, std::string* out);

}  // namespace troupe::runtime
