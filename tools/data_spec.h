// The data troupe's commands read: DATA arguments (fashion-mnist, csv:PATH, libsvm:PATH,
// tfrecord:PATH), what a dataset holds (rows, classes), and a whole dataset as arrays for
// scikit-learn style fitting (text columns one-hot when asked).
//
//   auto data = open_data("csv:wine.csv", "train", "label", {.batch_size = 128});
//   auto classes = count_classes(*data);                  // one more than the largest label
//   auto arrays = load_arrays(*data);                     // x float32 [n, d], y as stored
#pragma once

#include <string>
#include <vector>

#include "estimators/input/dataset.h"
#include "runtime/example.h"
#include "runtime/tensor.h"

namespace troupe::cli {

// What reading a libsvm file needs beyond the dataset's options.
struct DataOptions {
  bool class_names = false;  // labels as text ("1", "-1"): a classifier's class names
  int64_t num_features = 0;  // the width a model was trained on; 0: the files' largest index
  // tfrecord of SequenceExample: the steps a sequence is cut or padded to (the training data's,
  // for the evaluation data); 0: the longest of the first records.
  int64_t sequence_length = 0;
  // tfrecord: each feature as the model's columns read it (make_parse_example_spec: a
  // categorical column's feature VarLen, a sparse tensor a batch), and the features named in
  // `inferred` (the label, a weight column) as the first records hold them; nothing else is
  // read. Empty: every feature inferred, and none may vary in length.
  runtime::FeatureSpecs features;
  std::vector<std::string> inferred;
  // csv: columns whose field holds a sequence of space-separated values (a sequence column's
  // feature), batched as sparse tensors.
  std::vector<std::string> sequences;
};
// The steps the sequences of `d` were cut or padded to; 0 for data without sequences.
int64_t sequence_length_of(const estimators::input::Dataset& d);
// libsvm files are read as dense rows ("features" float32 [n]) up to this width; wider sparse
// data trains from C++ (input::libsvm and a weighted categorical column).
constexpr int64_t kMaxLibsvmFeatures = 32768;

// fashion-mnist (its `split`), csv:PATH (a glob too), whose `label` column is the label
// (several, "a,b": a multi-head model's, input::with_labels), or
// libsvm:PATH (svmlight files, a glob too: "label" and "features"), or tfrecord:PATH (TFRecord
// files of tf.Example, a glob too: a feature each, the spec inferred, none of varying length;
// or as DataOptions::features says).
runtime::Result<estimators::input::Dataset> open_data(const std::string& spec,
                                                      const std::string& split,
                                                      const std::string& label,
                                                      const estimators::input::DatasetOptions& o,
                                                      const DataOptions& data = {});
// The width of libsvm data's rows; 0 for other data.
int64_t libsvm_features(const estimators::input::Dataset& d);
// The number of classes: one more than the largest label; an error names a label that is not
// a class number.
runtime::Result<int64_t> count_classes(const estimators::input::Dataset& d);
runtime::Result<int64_t> count_rows(const estimators::input::Dataset& d);
// The distinct values of a text label column, sorted; none when the labels are numbers.
runtime::Result<std::vector<std::string>> label_names(const estimators::input::Dataset& d);
// A classifier's classes: the names of a text label column (sorted, as scikit-learn's
// LabelEncoder) and how many there are: `given` when > 0, else as many as the names, else one
// more than the largest label (Fashion-MNIST's 10 without counting), at least 2.
struct Classes {
  std::vector<std::string> names;
  int64_t count = 10;
};
runtime::Result<Classes> classes_of(const estimators::input::Dataset& d,
                                    const std::string& data_spec, int64_t given);

struct Arrays {
  runtime::Tensor x;  // float32 [n, d]: the features flattened and concatenated in name order
  runtime::Tensor y;  // the label column as stored
  // x's columns: a feature's name, "name[k]" for the k-th value of a vector, "name=value" for
  // a text value's indicator.
  std::vector<std::string> columns;
};
// Every example of `d`. A text feature is an error naming it, or with `one_hot_text` becomes
// one indicator column per value it takes in `d` (pandas' get_dummies), sorted.
runtime::Result<Arrays> load_arrays(const estimators::input::Dataset& d, bool one_hot_text = false);
// Text labels as the indices of their classes in `names` (sorted, label_names), an error naming
// a label that is none of them.
runtime::Result<runtime::Tensor> class_indices(const runtime::Tensor& labels,
                                               const std::vector<std::string>& names);

}  // namespace troupe::cli
