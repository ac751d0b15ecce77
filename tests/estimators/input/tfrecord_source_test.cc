// TFRecord files of tf.Example: files that another program wrote (write_tfrecord.py, with
// Python's protobuf and a framing of its own) read with their features inferred or given,
// compressed or not; a gzip stream cut short, a feature of the wrong size or kind and a missing
// one without a default are errors that name them; a damaged length loses only its record;
// VarLen features batch as sparse tensors; what write_tfrecord writes reads back the same;
// SequenceExample records through parse_sequence_examples and the graph's parsing ops.
#include "estimators/input/tfrecord_source.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "actors/runtime_system.h"
#include "estimators/input/dataset.h"
#include "harness/op_harness.h"
#include "harness/temp_dir.h"
#include "ops/parsing_ops.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::estimators::input;
using runtime::DType;
using runtime::Shape;
using runtime::Tensor;

namespace {

// `n` examples written by write_tfrecord.py to dir/name; `how`: its further arguments.
std::string python_wrote(const std::string& dir, const std::string& name, int n,
                         const std::string& how = "none") {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  const std::string command = std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " +
                              path + " " + std::to_string(n) + " " + how;
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  return path;
}

// Every chunk of every unit, in order, and how many records were skipped.
struct Read {
  std::vector<actors::Chunk> chunks;
  int64_t skipped = 0;
  int64_t rows() const {
    int64_t n = 0;
    for (const auto& c : chunks) n += c.last() - c.first();
    return n;
  }
};
Read read_all(const actors::Source& s) {
  Read r;
  for (int64_t u = 0; u < s.num_units(); ++u) {
    auto st = s.read(u, &r.chunks, &r.skipped);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
  }
  return r;
}

// The examples' ids, in order (component `id` of each chunk).
std::vector<int64_t> ids(const Read& r, int component) {
  std::vector<int64_t> out;
  for (const auto& c : r.chunks) {
    for (int64_t i = c.first(); i < c.last(); ++i) {
      out.push_back(c.components[component].data<int64_t>()[i]);
    }
  }
  return out;
}

std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> v;
  for (int64_t i = first; i < last; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("tf.Example records another program wrote: features inferred, every example read") {
  const std::string dir = testing::temp_dir("tfrecord_python");
  const std::string path = python_wrote(dir, "train.tfrecord", 50);
  auto src = TfRecordSource::open(path, {.records_per_unit = 16});
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  CHECK((*src)->components() == std::vector<std::string>{"id", "label", "word", "x"});
  const FeatureSpecs& spec = (*src)->features();
  CHECK(to_string(spec.at("x")) == "float32 [2]");
  CHECK(to_string(spec.at("id")) == "int64 []");
  CHECK(to_string(spec.at("word")) == "string []");
  CHECK((*src)->num_units() == 4);
  const Read r = read_all(**src);
  CHECK(r.skipped == 0);
  REQUIRE(r.rows() == 50);
  CHECK(ids(r, 0) == range(0, 50));
  const actors::Chunk& second = r.chunks[1];  // examples 16..31
  CHECK(second.components[3].shape() == Shape{16, 2});
  CHECK(second.components[3].data<float>()[2] == 17.0f);
  CHECK(second.components[3].data<float>()[3] == -17.0f);
  CHECK(second.components[2].data<std::string>()[0] == "w1");  // 16 mod 3
  CHECK(second.components[1].data<int64_t>()[1] == 1);         // 17 mod 2
}

TEST_CASE("gzip and zlib files, by suffix or told; a gzip stream cut short is DataLoss") {
  const std::string dir = testing::temp_dir("tfrecord_compressed");
  const std::string gz = python_wrote(dir, "a.tfrecord.gz", 40, "gzip");
  const std::string zz = python_wrote(dir, "b.tfrecord.zz", 40, "zlib");
  const std::string told = python_wrote(dir, "c.tfrecord", 40, "gzip");
  for (const auto& [path, compression] :
       {std::pair{gz, Compression::kAuto}, {zz, Compression::kAuto}, {told, Compression::kGzip}}) {
    auto src = TfRecordSource::open(path, {.compression = compression});
    REQUIRE_MESSAGE(src.ok(), path, ": ", src.status().to_string());
    CHECK(ids(read_all(**src), 0) == range(0, 40));
  }
  // Without its 8-byte trailer (CRC and size) the stream never ends: nothing pretends it did.
  std::string bytes;
  {
    std::ifstream in(gz, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = dir + "/cut.tfrecord.gz";
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size() - 8));
  auto src = TfRecordSource::open(cut);
  REQUIRE_FALSE(src.ok());
  CHECK(src.status().code() == runtime::Code::kDataLoss);
  CHECK(src.status().message().find(cut + ": the gzip stream is cut short") != std::string::npos);
  CHECK_FALSE(parse_compression("lz4").ok());
}

TEST_CASE("a given spec: defaults fill missing features; wrong sizes, kinds and gaps are named") {
  const std::string dir = testing::temp_dir("tfrecord_spec");
  const std::string path = python_wrote(dir, "t.tfrecord", 10);
  FeatureSpecs spec = {
      {"x", {.dtype = DType::kFloat32, .shape = Shape{2}}},
      {"label", {.dtype = DType::kInt64, .shape = Shape{}}},
      {"weight",
       {.dtype = DType::kFloat32, .shape = Shape{}, .default_value = Tensor::scalar<float>(0.5f)}}};
  auto src = TfRecordSource::open(path, {.features = spec});
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  const Read r = read_all(**src);
  REQUIRE(r.rows() == 10);
  CHECK(r.chunks[0].components[1].to_vector<float>() == std::vector<float>(10, 0.5f));
  CHECK(r.chunks[0].components[2].data<float>()[2] == 1.0f);  // x of example 1

  auto fails = [&](FeatureSpecs s, const std::string& says) {
    auto bad = TfRecordSource::open(path, {.features = s});
    REQUIRE(bad.ok());
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    const runtime::Status st = (*bad)->read(0, &chunks, &skipped);
    CHECK_MESSAGE(st.message().find(says) != std::string::npos, st.to_string());
    CHECK_MESSAGE(st.message().find(path + ": record at byte 0") != std::string::npos,
                  st.to_string());
    // Skipped and counted instead, when told.
    auto skipping = TfRecordSource::open(path, {.features = s, .skip_bad_records = true});
    REQUIRE(skipping.ok());
    const Read none = read_all(**skipping);
    CHECK(none.rows() == 0);
    CHECK(none.skipped == 10);
  };
  fails({{"x", {.dtype = DType::kFloat32, .shape = Shape{3}}}},
        "feature 'x' has 2 values, not the 3 of float32 [3]");
  fails({{"id", {.dtype = DType::kFloat32, .shape = Shape{}}}},
        "feature 'id' is int64, not float32 []");
  fails({{"age", {.dtype = DType::kInt64, .shape = Shape{}}}},
        "feature 'age' is missing and its spec has no default");
  // A spec that cannot be is refused at open.
  auto wrong_default =
      TfRecordSource::open(path, {.features = {{"w",
                                                {.dtype = DType::kFloat32,
                                                 .shape = Shape{2},
                                                 .default_value = Tensor::scalar<float>(1.0f)}}}});
  REQUIRE_FALSE(wrong_default.ok());
  CHECK(wrong_default.status().message().find("feature 'w': its default") != std::string::npos);
}

TEST_CASE("a damaged length in the middle loses its record alone, counted; unskipped, an error") {
  const std::string dir = testing::temp_dir("tfrecord_damaged");
  const std::string path = python_wrote(dir, "d.tfrecord", 21, "none --damage");
  auto strict = TfRecordSource::open(path);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.status().message().find(path) != std::string::npos);
  auto src = TfRecordSource::open(path, {.records_per_unit = 4, .skip_bad_records = true});
  REQUIRE_MESSAGE(src.ok(), src.status().to_string());
  CHECK((*src)->damaged_stretches() == 1);
  const Read r = read_all(**src);
  CHECK(r.skipped == 1);
  std::vector<int64_t> want = range(0, 21);
  want.erase(want.begin() + 10);
  CHECK(ids(r, 0) == want);
}

TEST_CASE("VarLen features batch as sparse tensors through a Dataset's pipeline") {
  const std::string dir = testing::temp_dir("tfrecord_varlen");
  const std::string path = python_wrote(dir, "v.tfrecord", 6, "none --varlen");
  auto data = tfrecord(path, "label", {}, {.batch_size = 3});
  REQUIRE_MESSAGE(data.ok(), data.status().to_string());
  CHECK(data->sparse == std::vector<std::string>{"tags"});
  actors::Runtime rt;
  auto pipeline = Pipeline::start(rt, *data);
  REQUIRE_MESSAGE(pipeline.ok(), pipeline.status().to_string());
  auto batch = (*pipeline)->next();
  REQUIRE_MESSAGE(batch.ok(), batch.status().to_string());
  const std::vector<std::string> names = data->batch_components();
  auto at = [&](const std::string& name) {
    const auto it = std::find(names.begin(), names.end(), name);
    REQUIRE(it != names.end());
    return (*batch)[static_cast<size_t>(it - names.begin())];
  };
  // Examples 0, 1, 2 have 0, 1 and 2 tags: [0], [0, 1].
  CHECK(at("tags/dense_shape").to_vector<int64_t>() == std::vector<int64_t>{3, 2});
  CHECK(at("tags/values").to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
  CHECK(at("tags/indices").to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 0, 2, 1});
  CHECK(at("id").to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("write_tfrecord writes what reads back the same, and parse_examples parses it") {
  const std::string dir = testing::temp_dir("tfrecord_written");
  std::filesystem::create_directories(dir);
  auto data =
      arrays({{"x", Tensor::from_vector<float>(Shape{5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
              {"y", Tensor::from_vector<int64_t>(Shape{5}, {1, 0, 1, 1, 0})},
              {"s", Tensor::from_vector<std::string>(Shape{5}, {"a", "b", "c", "d", "e"})}},
             "y");
  REQUIRE(data.ok());
  for (const std::string name : {"w.tfrecord", "w.tfrecord.gz", "w.tfrecord.zlib"}) {
    const std::string path = dir + "/" + name;
    REQUIRE(write_tfrecord(*data->source, path).ok());
    auto src = TfRecordSource::open(path);
    REQUIRE_MESSAGE(src.ok(), src.status().to_string());
    const Read r = read_all(**src);
    REQUIRE(r.chunks.size() == 1);
    CHECK(r.chunks[0].components[0].to_vector<std::string>() ==
          std::vector<std::string>{"a", "b", "c", "d", "e"});
    CHECK(r.chunks[0].components[1].to_vector<float>() ==
          std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(r.chunks[0].components[2].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 1, 0});
  }
  // The bytes of one record, parsed as tf.io.parse_example would.
  std::string bytes;
  {
    std::ifstream in(dir + "/w.tfrecord", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  runtime::RecordReader reader(bytes.data(), bytes.size(), "w.tfrecord");
  std::vector<std::string_view> serialized(2);
  REQUIRE(*reader.next(&serialized[0]));
  REQUIRE(*reader.next(&serialized[1]));
  auto parsed = parse_examples(serialized, {{"x", {.dtype = DType::kFloat32, .shape = Shape{2}}},
                                            {"y", {.dtype = DType::kInt64, .shape = Shape{}}}});
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  CHECK((*parsed)[0].shape() == Shape{2, 2});
  CHECK((*parsed)[0].to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  CHECK((*parsed)[1].to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK_FALSE(parse_examples({std::string_view("\xff\xff", 2)}, {}).ok());
}

TEST_CASE("SequenceExample records: context features, feature lists cut or padded to a length") {
  const std::string dir = testing::temp_dir("tfrecord_sequence");
  // Example i: the context's "label", and "frames" of 3 + i mod 3 steps of 2 floats:
  // step t = (s (t + 1) / 8, (i mod 5) / 8).
  const std::string path = python_wrote(dir, "seq.tfrecord", 12, "none --sequence");
  auto inferred = TfRecordSource::open(path);
  REQUIRE_MESSAGE(inferred.ok(), inferred.status().to_string());
  const auto& spec = (*inferred)->features();
  REQUIRE(spec.size() == 2);
  CHECK(to_string(spec.at("frames")) == "float32 [2] sequence");
  CHECK(to_string(spec.at("label")) == "int64 []");
  CHECK((*inferred)->sequence_length() == 5);  // the most steps of the records
  CHECK((*inferred)->components() == std::vector<std::string>{"frames", "label"});
  Read r = read_all(**inferred);
  REQUIRE(r.rows() == 12);
  const Tensor& frames = r.chunks[0].components[0];
  REQUIRE(frames.shape() == Shape{12, 5, 2});
  for (int i = 0; i < 12; ++i) {
    const float sign = (i * 7) % 4 < 2 ? 1.f : -1.f;
    const float* row = frames.data<float>() + i * 10;
    for (int t = 0; t < 5; ++t) {
      CAPTURE(i);
      CAPTURE(t);
      const bool present = t < 3 + i % 3;
      CHECK(row[2 * t] == (present ? sign * (t + 1) / 8.f : 0.f));
      CHECK(row[2 * t + 1] == (present ? (i % 5) / 8.f : 0.f));
    }
  }
  // Told a length: longer lists are cut to it.
  TfRecordOptions three;
  three.sequence_length = 3;
  auto cut = TfRecordSource::open(path, three);
  REQUIRE(cut.ok());
  Read c = read_all(**cut);
  CHECK(c.chunks[0].components[0].shape() == Shape{12, 3, 2});
  CHECK(c.chunks[0].components[0].data<float>()[2 * 3 * 5 + 4] == -3 / 8.f);  // example 5, step 2

  // parse_sequence_examples on the records themselves, with each one's number of steps.
  std::string bytes;
  REQUIRE(runtime::read_file(path, &bytes).ok());
  runtime::RecordReader reader(bytes.data(), bytes.size(), path);
  std::vector<std::string_view> records;
  for (std::string_view body;;) {
    auto more = reader.next(&body);
    REQUIRE(more.ok());
    if (!*more) break;
    records.push_back(body);
  }
  REQUIRE(records.size() == 12);
  std::vector<int64_t> lengths;
  auto parsed = parse_sequence_examples(records, spec, 4, &lengths);
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().to_string());
  CHECK((*parsed)[0].shape() == Shape{12, 4, 2});
  CHECK(lengths == std::vector<int64_t>{3, 4, 5, 3, 4, 5, 3, 4, 5, 3, 4, 5});
  // A step of another size than the spec's is an error naming the list and the step.
  FeatureSpecs wide = spec;
  wide["frames"].shape = Shape{3};
  auto bad = parse_sequence_examples(records, wide, 4);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("feature list 'frames': step 0 has 2 values") !=
        std::string::npos);
  CHECK_FALSE(parse_examples(records, spec).ok());  // a feature list is not an Example's

  // The same records through the graph ops: a batch padded to its longest list (TF's
  // parse_sequence_example), and one proto alone at its own length.
  testing::OpTest t;
  Tensor batch(DType::kString, Shape{4});
  for (int i = 0; i < 4; ++i) batch.data<std::string>()[i] = std::string(records[i]);
  ops::ParsedSequences seq = ops::parse_sequence_example(t.b, t.feed(batch), spec);
  REQUIRE(t.b.ok());
  const Tensor padded = t.eval(seq.sequences.at("frames"));
  CHECK(padded.shape() == Shape{4, 5, 2});
  CHECK(padded.data<float>()[10 + 2 * 3] == (7 % 4 < 2 ? 4 / 8.f : -4 / 8.f));  // example 1, step 3
  CHECK(padded.data<float>()[2 * 4] == 0.f);  // example 0 has 3 steps: step 4 is padding
  CHECK(t.eval(seq.lengths.at("frames")).to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5, 3});
  CHECK(t.eval(seq.context.at("label")).shape() == Shape{4});
  runtime::Output one = t.feed(Tensor::scalar<std::string>(std::string(records[1])));
  ops::ParsedSequences single = ops::parse_single_sequence_example(t.b, one, spec);
  CHECK(t.eval(single.sequences.at("frames")).shape() == Shape{4, 2});
  CHECK(t.eval(single.lengths.at("frames")).to_vector<int64_t>() == std::vector<int64_t>{4});
  CHECK(t.eval(single.context.at("label")).shape() == Shape{});
  std::filesystem::remove_all(dir);
}
