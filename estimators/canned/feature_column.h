// Feature columns, as tf.feature_column: how a model reads each raw feature. Numeric columns
// pass numbers (normalized when they carry statistics); categorical columns turn values into
// ids (vocabulary, identity, hash bucket, bucketized numbers, crosses), which a DNN reads
// through an embedding or an indicator and a linear model through a weight per id.
//
//   auto age = numeric_column("age");
//   auto age_buckets = bucketized_column(age, {18, 25, 30, 35, 40, 45, 50, 55, 60, 65});
//   auto work = categorical_column_with_vocabulary_list("workclass", {"Private", "State-gov"}, 1);
//   auto job = categorical_column_with_hash_bucket("occupation", 1000);
//   auto job_x_education = crossed_column({"occupation", "education"}, {}, 10000);
//   DNNOptions dnn{.feature_columns = {age, embedding_column(job, 8), indicator_column(work)}};
//   LinearOptions wide{.feature_columns = {age_buckets, work, job, job_x_education}};
//   auto spec = make_parse_example_spec(wide.feature_columns);  // for tfrecord or ParseExample
//
// Ids stay ids: a hash bucket of 10^6 is a million-row weight variable read by Gather, whose
// gradient updates only the rows a batch touched (ops/training_ops.h), never a dense one-hot.
// A feature holds one value per example ([batch]), k ([batch, k]), or as many as it has (a
// sparse tensor, or a padded dense feature whose missing values are "" or -1); an example's ids
// are combined by the embedding's combiner (sum, mean, sqrtn) or summed (indicator, linear),
// through embedding_lookup_sparse. Sequence columns (sequence_numeric_column, ...) keep the
// order instead: a recurrent model reads them a step at a time (sequence_input_layer).
// Variables are named as TF's: input_layer/<column>/embedding_weights,
// linear_model/<column>/weights.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/input_layer.h"
#include "estimators/model_fn.h"
#include "ops/sparse_ops.h"
#include "runtime/example.h"
#include "runtime/tensor.h"

namespace troupe::estimators {

struct FeatureColumn {
  enum class Kind {
    kNumeric,
    kBucketized,
    kVocabulary,
    kIdentity,
    kHashBucket,
    kCrossed,
    kWeighted,
    kEmbedding,
    kIndicator
  };
  Kind kind = Kind::kNumeric;
  std::string key;                      // the feature read; crossed: none (see cross_keys)
  int64_t width = 1;                    // numeric: values an example
  FeatureStats normalizer;              // numeric: (x - mean) / scale when not empty
  std::vector<double> boundaries;       // bucketized, ascending
  runtime::Tensor vocabulary;           // vocabulary: a string or int64 list
  int64_t num_oov_buckets = 0;          // vocabulary
  int64_t default_value = -1;           // vocabulary, identity: the id of other values; -1: error
  int64_t num_buckets = 0;              // identity, hash bucket, crossed
  std::vector<std::string> cross_keys;  // crossed: raw features, crossed by value
  std::vector<FeatureColumn> sources;   // bucketized: the numeric column; crossed: categorical
                                        // columns crossed by id; weighted, embedding,
                                        // indicator: the categorical column
  std::string weight_key;               // weighted: the feature holding each id's weight
  int64_t dimension = 0;                // embedding
  std::string combiner = "mean";        // embedding: sum, mean or sqrtn
  // sequence_*: an example's feature is a sequence of steps, a value each (numeric: width).
  bool sequence = false;

  // TF's column names: "age", "age_bucketized", "a_X_b", "work_embedding", "work_indicator".
  std::string name() const;
  // Gives ids (all kinds but numeric, embedding and indicator).
  bool categorical() const;
  // Ids of a categorical column are in [0, id_count()).
  int64_t id_count() const;
  // A sequence column, or an embedding or indicator of one.
  bool is_sequence() const;
};

FeatureColumn numeric_column(const std::string& key, int64_t width = 1,
                             FeatureStats normalizer = {});
FeatureColumn bucketized_column(const FeatureColumn& numeric, std::vector<double> boundaries);
FeatureColumn categorical_column_with_vocabulary_list(const std::string& key,
                                                      const std::vector<std::string>& vocabulary,
                                                      int64_t num_oov_buckets = 0,
                                                      int64_t default_value = -1);
// The same over integer values (TF takes both under one name; an overload here would make
// {"a", "b"} ambiguous).
FeatureColumn categorical_column_with_int_vocabulary_list(const std::string& key,
                                                          const std::vector<int64_t>& vocabulary,
                                                          int64_t num_oov_buckets = 0,
                                                          int64_t default_value = -1);
// One entry per line of the file (TF's vocabulary_file); an error names the file.
runtime::Result<FeatureColumn> categorical_column_with_vocabulary_file(const std::string& key,
                                                                       const std::string& path,
                                                                       int64_t num_oov_buckets = 0,
                                                                       int64_t default_value = -1);
FeatureColumn categorical_column_with_identity(const std::string& key, int64_t num_buckets,
                                               int64_t default_value = -1);
FeatureColumn categorical_column_with_hash_bucket(const std::string& key, int64_t hash_bucket_size);
FeatureColumn crossed_column(const std::vector<std::string>& keys,
                             const std::vector<FeatureColumn>& columns, int64_t hash_bucket_size);
FeatureColumn weighted_categorical_column(const FeatureColumn& categorical,
                                          const std::string& weight_key);
FeatureColumn embedding_column(const FeatureColumn& categorical, int64_t dimension,
                               const std::string& combiner = "mean");
FeatureColumn indicator_column(const FeatureColumn& categorical);

// Sequence columns, as tf.contrib.feature_column's sequence_*: an example's feature is a
// sequence of steps, one value each (numeric: `width` values each), given as a sparse tensor
// (a VarLen feature: the example's steps in order) or as a dense one, padded past its length
// with the missing value ("" or -1; a dense numeric one is complete). Categorical ones are read
// through embedding_column or indicator_column, step by step, by sequence_input_layer.
FeatureColumn sequence_numeric_column(const std::string& key, int64_t width = 1);
FeatureColumn sequence_categorical_column_with_identity(const std::string& key, int64_t num_buckets,
                                                        int64_t default_value = -1);
FeatureColumn sequence_categorical_column_with_vocabulary_list(
    const std::string& key, const std::vector<std::string>& vocabulary, int64_t num_oov_buckets = 0,
    int64_t default_value = -1);
FeatureColumn sequence_categorical_column_with_hash_bucket(const std::string& key,
                                                           int64_t hash_bucket_size);

// tf.feature_column.make_parse_example_spec: how a tf.Example holds what `columns` read. A
// numeric column's feature is FixedLen float32 of its width ([] for one value); a categorical
// column's is VarLen (a sparse tensor a batch): of its vocabulary's dtype, int64 for identity,
// string for a hash bucket or a cross by value (TF's defaults), and a weighted column's weights
// float32; bucketized, embedding, indicator and crossed columns take their sources'. A feature
// read two ways is an error naming it.
runtime::Result<runtime::FeatureSpecs> make_parse_example_spec(
    const std::vector<FeatureColumn>& columns);

// What is wrong with a column, naming it: an empty vocabulary, no buckets, an embedding of a
// numeric column, ... `for_linear`: the columns a linear model takes (numeric and categorical),
// else those an input layer takes (numeric, bucketized, embedding, indicator).
runtime::Status validate_columns(const std::vector<FeatureColumn>& columns, bool for_linear);

// The ids of a categorical column as a [batch, k] sparse tensor of int64, and each id's weight
// ([nnz] float32; invalid when every weight is 1). A feature given as a sparse tensor, the three
// features <key>/indices, <key>/values and <key>/dense_shape (ops/sparse_ops.h), keeps its
// entries; a dense one ([batch] or [batch, k]) loses its missing values, "" and -1, as TF's
// columns read it, so that a padded feature of varying length counts the values it has. Its
// weights come alike: <weight_key>/values beside sparse ids, else a dense feature shaped as the
// ids' feature.
struct CategoricalIds {
  ops::SparseOutput ids;
  runtime::Output weights;
};
runtime::Result<CategoricalIds> categorical_ids(ModelInputs& in, const FeatureColumn& column);

// How many blocks of rows a variable of `bytes` is split into, over up to `max_parts` ps tasks:
// as many as hold kMinSliceBytes each, as TF's min_max_variable_partitioner (whose 64 MB
// default suits models far bigger than a ps's share here). Each block may live on another task;
// a lookup gathers from each where it lives (ops::embedding_lookup).
constexpr int64_t kMinSliceBytes = 256 << 10;
int variable_partitions(int64_t bytes, int max_parts);

// What is wrong with columns sequence_input_layer reads, naming the column: each a sequence
// numeric column, or an embedding or indicator of a sequence categorical one.
runtime::Status validate_sequence_columns(const std::vector<FeatureColumn>& columns);

// tf.contrib.feature_column.sequence_input_layer: `values` [batch, steps, width] float32, the
// columns side by side at each step (steps: the batch's longest sequence), zeros past an
// example's length; `lengths` [batch] int64, each example's steps (the first column's: the
// columns of one example must agree, as TF asserts). Embeddings are
// sequence_input_layer/<column>/embedding_weights; an id's row is read for each step it is at.
struct SequenceInput {
  runtime::Output values;
  runtime::Output lengths;
};
runtime::Result<SequenceInput> sequence_input_layer(ModelInputs& in,
                                                    const std::vector<FeatureColumn>& columns,
                                                    int64_t* width);

// The DNN's input: every column as float32 values, concatenated in the given order, [batch,
// width]. Embeddings are split into up to `partitions` blocks (variable_partitions).
runtime::Result<runtime::Output> input_layer(ModelInputs& in,
                                             const std::vector<FeatureColumn>& columns,
                                             int64_t* width, int partitions = 1);

// A dense model's input (the DNN's, the RNN's): input_layer over `columns` when there are
// any, else dense_input_layer over the features named in `keys` (input_layer.h), with the
// numeric features standardized and the weight column left out.
template <class Options>
runtime::Result<runtime::Output> dense_features(ModelInputs& in, const Options& o, int64_t* width,
                                                int partitions = 1) {
  if (o.feature_columns.empty()) {
    return dense_input_layer(in, o.feature_keys, o.standardize, width, o.head.weight_column);
  }
  return input_layer(in, o.feature_columns, width, partitions);
}

// A linear model's logits [batch, units]: the sum of each column's weighted values (numeric)
// or of the weight rows of its ids (categorical), plus a bias, its variables under `scope`
// (<scope>/<column>/weights, <scope>/bias_weights), the weights split into up to `partitions`
// blocks (variable_partitions). `weights` gets each weight variable, or each block (for
// regularization).
runtime::Result<runtime::Output> linear_model(ModelInputs& in,
                                              const std::vector<FeatureColumn>& columns,
                                              int64_t units,
                                              std::vector<runtime::Output>* weights = nullptr,
                                              const std::string& scope = "linear_model",
                                              int partitions = 1);

}  // namespace troupe::estimators
