// Feature columns as text, for the command line: the small spec file `troupe train --columns`
// reads, the lines troupe_model.txt keeps, and the columns troupe infers from a table (numbers
// numeric, text categorical with a vocabulary from the data).
//
//   # one column a line: KIND FEATURE [name=value ...] [indicator | embedding=D]
//   numeric hours_per_week
//   bucketized age boundaries=18,25,30,35,40,45,50,55,60,65
//   vocabulary workclass values=Private,Self-emp-not-inc,State-gov oov=1 indicator
//   vocabulary_file occupation path=occupations.txt oov=1 embedding=8 combiner=mean
//   identity digit buckets=10
//   hash native_country buckets=1000 embedding=6
//   crossed education,occupation buckets=10000
//   sequence_identity tokens buckets=1000 embedding=16     # --model rnn: a sequence an example
//   sequence_numeric readings width=3
//
// Options: oov=, default=, buckets=, weight=FEATURE (a weighted categorical), embedding=D and
// combiner= (sum, mean, sqrtn), indicator, mean= and scale= (numeric: a normalizer), width=.
// Vocabulary values are percent-escaped where they hold ',', ' ', '%' or control characters.
#pragma once

#include <string>
#include <vector>

#include "estimators/canned/feature_column.h"
#include "estimators/input/dataset.h"

namespace troupe::cli {

// One column as a spec line (a vocabulary file's words inline), and back; an error names what
// is wrong with the line.
std::string column_text(const estimators::FeatureColumn& column);
runtime::Result<estimators::FeatureColumn> parse_column(const std::string& line);
// The columns of a spec file (blank lines and # comments skipped); errors name file and line.
// For wide & deep a line starting with "wide " is a column of the linear part, one starting
// with "deep " (or neither) of the DNN.
struct ColumnSpec {
  std::vector<estimators::FeatureColumn> columns;
  std::vector<estimators::FeatureColumn> wide;
};
runtime::Result<ColumnSpec> read_columns_file(const std::string& path);

// The columns of `data`'s features: a numeric column per number feature (with its statistics from
// `stats`, when there), and a vocabulary column (its values from the data, most frequent
// first, one out-of-vocabulary bucket) per text feature, or a hash bucket column (twice as many
// buckets as values, at most 2^20) past kMaxInferredVocabulary values; a DNN reads them through
// an indicator (up to 50 ids) or an embedding of 6 * ids^(1/4) dimensions (at most 64).
constexpr int64_t kMaxInferredVocabulary = 10000;
runtime::Result<std::vector<estimators::FeatureColumn>> infer_columns(
    const estimators::input::Dataset& data, const estimators::Standardization& stats, bool dnn);
// Wide & deep's linear part from a linear model's columns (infer_columns with dnn false): its
// categorical columns, and a crossed column of every pair of them, which memorizes the
// interactions the DNN may smooth over.
std::vector<estimators::FeatureColumn> wide_columns_of(
    const std::vector<estimators::FeatureColumn>& linear);

// A tree model's columns from a DNN's (infer_columns with dnn true): trees cannot train
// embeddings, so every categorical column is read one-hot (an indicator column).
std::vector<estimators::FeatureColumn> tree_columns_of(std::vector<estimators::FeatureColumn> dnn);

// Comma-separated floats, as column specs and troupe_model.txt write them.
std::string format_floats(const std::vector<float>& v);
bool parse_floats(const std::string& text, std::vector<float>* out);

}  // namespace troupe::cli
