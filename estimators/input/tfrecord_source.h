// TFRecord files of tf.Example (or tf.train.SequenceExample) protos, TensorFlow's own training
// data, as a dataset: what tf.data.TFRecordDataset and tf.io.parse_example (or
// parse_single_sequence_example) read. Each feature of the spec is a component. A
// SequenceExample's context features are read as an Example's features, and each of its
// feature lists as a kSequence feature: the example's steps, cut or padded (zeros, or the
// string "") to sequence_length, as a [sequence_length, step...] tensor. A FixedLen feature
// (tf.io.FixedLenFeature) has one shape in every example, of float32, int64 or string, and a
// default for an example without it; a VarLen feature (tf.io.VarLenFeature) is a list of any
// length, batched as a sparse tensor; a SparseFeature (kSparse) is batched as its index and
// value features, two VarLen ones, which a weighted categorical column reads. Without a spec,
// it is inferred from the first records: a
// feature every record has with n values is FixedLen
// ([] for one, [n] otherwise), any other VarLen. Files may be GZIP or ZLIB compressed (TF's
// compression_type), told or known by the suffix (.gz, .zz or .zlib).
//
//   TfRecordOptions o;
//   o.features = {{"image", {.dtype = DType::kFloat32, .shape = Shape{784}}},
//                 {"tags", {.kind = FeatureSpec::Kind::kVarLen, .dtype = DType::kInt64}},
//                 {"label", {.dtype = DType::kInt64}}};
//   auto src = TfRecordSource::open("/data/train-*.tfrecord", o);  // Result<shared_ptr<...>>
//   TROUPE_RETURN_IF_ERROR(write_tfrecord(**csv_source, "/data/train.tfrecord.gz"));
//
// A record that is not a tf.Example, a feature of another type or size than its spec, or a
// frame whose checksum fails is an error naming the file, the record's byte offset and the
// feature, or is counted and skipped with skip_bad_records; after a damaged length the reader
// resynchronises on the next frame (runtime::RecordReader::resync) and reads on. A compressed
// file cut short (no gzip trailer) is DataLoss. Files are memory-mapped (compressed ones
// inflated into memory once, at open); read() is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/queue_runner.h"
#include "estimators/input/mapped_file.h"
#include "runtime/example.h"

namespace troupe::estimators::input {

// The spec's types and the parsers are runtime/example.h's, shared with the ParseExample op.
using runtime::FeatureSpec;
using runtime::FeatureSpecs;
using runtime::parse_examples;
using runtime::parse_sequence_examples;

enum class Compression { kAuto, kNone, kGzip, kZlib };
// "", "none", "gzip", "zlib" or "auto" (any case); an error naming the word otherwise.
runtime::Result<Compression> parse_compression(const std::string& name);

struct TfRecordOptions {
  FeatureSpecs features;  // empty: inferred from the first `infer_records` records
  Compression compression = Compression::kAuto;
  int64_t infer_records = 100;
  // A unit of the runner's: records one reader parses together, into one chunk when no
  // feature is VarLen.
  int64_t records_per_unit = 1024;
  // A record that fails its checksum or its spec is counted and skipped, not an error.
  bool skip_bad_records = false;
  // The steps of every kSequence feature an example; 0: the most the inferred records have.
  int64_t sequence_length = 0;
};

// Writes every example of `source` as a tf.Example record, each component a feature (float32
// and float64 as a FloatList, integers and bools as an Int64List, strings as a BytesList),
// compressed as `compression` says (kAuto: by the path's suffix), atomically.
runtime::Status write_tfrecord(const actors::Source& source, const std::string& path,
                               Compression compression = Compression::kAuto);

class TfRecordSource : public actors::Source {
 public:
  // `pattern`: a path or a glob (several separated by commas).
  static runtime::Result<std::shared_ptr<TfRecordSource>> open(const std::string& pattern,
                                                               TfRecordOptions options = {});
  // The spec, given or inferred; its VarLen features, which a Dataset batches as sparse tensors.
  const FeatureSpecs& features() const { return spec_; }
  int64_t sequence_length() const { return sequence_length_; }
  std::vector<std::string> var_len() const;
  // Stretches of bytes in which no record could be located (after a damaged length).
  int64_t damaged_stretches() const { return damaged_; }

  std::string name() const override { return "tfrecord " + pattern_; }
  std::vector<std::string> components() const override;
  int64_t num_units() const override { return static_cast<int64_t>(units_.size()); }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override;

 private:
  struct File;
  struct Unit {
    int file = 0;
    uint64_t begin = 0, end = 0;  // byte range of its frames
    int64_t records = 0;          // frames in it; a damaged stretch has none
  };
  TfRecordSource() = default;
  runtime::Status read_unit(const Unit& u, std::vector<actors::Chunk>* out, int64_t* skipped) const;

  std::string pattern_;
  TfRecordOptions options_;
  FeatureSpecs spec_;
  int64_t sequence_length_ = 0;
  std::vector<std::shared_ptr<const File>> files_;
  std::vector<Unit> units_;
  int64_t damaged_ = 0;
};

}  // namespace troupe::estimators::input
