// Input functions and sources: arrays, CSV (types, quoting, defaults, shards, bad rows), libsvm,
// record files (round trip, corrupt and truncated files), Fashion-MNIST, transformations
// (batch, drop_remainder, epochs, shuffle, map) and the train/test split.
#include "estimators/input/dataset.h"

#include <doctest/doctest.h>

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include "estimators/input/columns_source.h"
#include "estimators/input/eigen_columns.h"
#include "estimators/input/record_file.h"
#include "harness/temp_dir.h"
#include "runtime/record_io.h"

using namespace troupe;
using namespace troupe::estimators::input;
using namespace troupe::runtime;

namespace {

std::string temp_dir() {
  static std::string dir = [] {
    std::string d = troupe::testing::temp_dir("input");
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string write(const std::string& name, const std::string& text) {
  std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Every batch of a dataset, concatenated per component (as doubles or strings).
struct Drained {
  std::vector<std::vector<double>> numbers;
  std::vector<std::vector<std::string>> strings;
  std::vector<int64_t> batch_sizes;
  runtime::Status end;
  actors::RunnerStats stats;
};

Drained drain(const Dataset& d) {
  actors::Runtime rt;
  auto p = Pipeline::start(rt, d);
  REQUIRE(p.ok());
  Drained out;
  const size_t n = d.batch_components().size();
  out.numbers.resize(n);
  out.strings.resize(n);
  while (true) {
    auto b = (*p)->next();
    if (!b.ok()) {
      out.end = b.status();
      break;
    }
    out.batch_sizes.push_back((*b)[0].dim(0));
    for (size_t c = 0; c < n; ++c) {
      const Tensor& t = (*b)[c];
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        if (t.dtype() == DType::kString) {
          out.strings[c].push_back(t.data<std::string>()[i]);
        } else {
          Tensor one = Tensor::scalar<double>(0);
          runtime::visit_numeric(t.dtype(), [&](auto zero) {
            using T = decltype(zero);
            one.data<double>()[0] = static_cast<double>(t.data<T>()[i]);
          });
          out.numbers[c].push_back(one.data<double>()[0]);
        }
      }
    }
  }
  out.stats = (*p)->runner_stats();
  return out;
}

}  // namespace

TEST_CASE("arrays: batches, the last smaller one or dropped, epochs") {
  Tensor x = Tensor::from_vector<float>(Shape{5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor y = Tensor::from_vector<int64_t>(Shape{5}, {0, 1, 2, 3, 4});
  auto d = arrays({{"x", x}, {"y", y}}, "y", {.batch_size = 2, .num_epochs = 2});
  REQUIRE(d.ok());
  CHECK(d->features == std::vector<std::string>{"x"});
  Drained r = drain(*d);
  CHECK(r.end.code() == runtime::Code::kOutOfRange);
  // Epochs run together: 10 examples in batches of 2.
  CHECK(r.batch_sizes == std::vector<int64_t>{2, 2, 2, 2, 2});
  CHECK(r.numbers[1] == std::vector<double>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  d->options.num_epochs = 1;
  CHECK(drain(*d).batch_sizes == std::vector<int64_t>{2, 2, 1});
  d->options.drop_remainder = true;
  CHECK(drain(*d).batch_sizes == std::vector<int64_t>{2, 2});

  auto bad = arrays({{"x", x}, {"y", Tensor::from_vector<int64_t>(Shape{4}, {0, 1, 2, 3})}}, "y");
  CHECK(bad.status().message().find("'y' has 4 examples") != std::string::npos);
  CHECK(arrays({{"x", x}}, "label").status().message().find("no column 'label'") !=
        std::string::npos);
}

TEST_CASE("arrays: seeded shuffle reproducible; map over batches and examples") {
  std::vector<int64_t> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = i;
  Tensor k = Tensor::from_vector(Shape{1000}, v);
  DatasetOptions o{.batch_size = 64, .shuffle = true, .seed = 3, .shuffle_buffer = 100};
  auto a = drain(*arrays({{"k", k}}, "", o)).numbers[0];
  auto b = drain(*arrays({{"k", k}}, "", o)).numbers[0];
  o.seed = 4;
  auto c = drain(*arrays({{"k", k}}, "", o)).numbers[0];
  CHECK(a == b);
  CHECK(a != c);
  std::multiset<double> seen(a.begin(), a.end());
  CHECK(seen.size() == 1000);
  CHECK(std::set<double>(a.begin(), a.end()).size() == 1000);

  DatasetOptions m{.batch_size = 1000};
  m.map = [](std::vector<Tensor>& batch) {
    Tensor twice(DType::kInt64, batch[0].shape());
    for (int64_t i = 0; i < twice.num_elements(); ++i) {
      twice.data<int64_t>()[i] = 2 * batch[0].data<int64_t>()[i];
    }
    batch[0] = twice;
    return runtime::ok_status();
  };
  m.map_example = [](std::vector<Tensor>& ex) {
    CHECK(ex[0].shape() == Shape{});
    ex.push_back(Tensor::scalar<float>(static_cast<float>(ex[0].data<int64_t>()[0]) + 0.5f));
    return runtime::ok_status();
  };
  auto mapped = arrays({{"k", k}}, "", m);
  REQUIRE(mapped.ok());
  actors::Runtime rt;
  auto p = Pipeline::start(rt, *mapped);
  auto batch = (*p)->next();
  REQUIRE(batch.ok());
  REQUIRE(batch->size() == 2);
  CHECK((*batch)[0].data<int64_t>()[10] == 20);
  CHECK((*batch)[1].data<float>()[10] == 10.5f);
}

TEST_CASE("arrays: small batches are cut in the loop, the runner's batches in its order") {
  std::vector<int64_t> v(1000);
  std::vector<float> xs(3000);
  for (int i = 0; i < 1000; ++i) {
    v[i] = i;
    for (int j = 0; j < 3; ++j) xs[i * 3 + j] = static_cast<float>(i * 3 + j);
  }
  Tensor k = Tensor::from_vector(Shape{1000}, v);
  Tensor x = Tensor::from_vector(Shape{1000, 3}, xs);
  DatasetOptions o{
      .batch_size = 64, .num_epochs = 2, .shuffle = true, .seed = 5, .shuffle_buffer = 100};
  auto small = arrays({{"x", x}, {"k", k}}, "k", o);
  REQUIRE(small.ok());
  // A map that changes nothing sends the same data through the runner.
  DatasetOptions m = o;
  m.map = [](std::vector<Tensor>&) { return runtime::ok_status(); };
  auto mapped = arrays({{"x", x}, {"k", k}}, "k", m);
  REQUIRE(mapped.ok());
  {
    actors::Runtime rt;
    auto in_loop = Pipeline::start(rt, *small);
    REQUIRE(in_loop.ok());
    CHECK((*in_loop)->reads_in_loop());
    CHECK_FALSE((*in_loop)->queue_actor());
    auto through_runner = Pipeline::start(rt, *mapped);
    REQUIRE(through_runner.ok());
    CHECK_FALSE((*through_runner)->reads_in_loop());
  }
  const Drained a = drain(*small), b = drain(*mapped);
  CHECK(a.numbers == b.numbers);
  CHECK(a.batch_sizes == b.batch_sizes);
  CHECK(a.end.code() == runtime::Code::kOutOfRange);
  CHECK(a.stats.examples == 2000);
  CHECK(a.stats.epochs == 2);
  CHECK(a.stats.done);
  CHECK(a.stats.status.ok());

  // Resumed after 5 batches, it reads on with the sixth.
  actors::Runtime rt;
  auto resumed = Pipeline::start(rt, *small, 5);
  REQUIRE(resumed.ok());
  auto sixth = (*resumed)->next();
  REQUIRE(sixth.ok());
  const auto ks = (*sixth)[1].to_vector<int64_t>();
  CHECK(std::vector<double>(ks.begin(), ks.end()) ==
        std::vector<double>(a.numbers[1].begin() + 5 * 64, a.numbers[1].begin() + 6 * 64));

  // Batches above kLoopBatchBytes go through the runner, beside training.
  DatasetOptions big = o;
  big.batch_size = Pipeline::kLoopBatchBytes / (3 * sizeof(float) + sizeof(int64_t)) + 1;
  auto large = Pipeline::start(rt, *arrays({{"x", x}, {"k", k}}, "k", big));
  REQUIRE(large.ok());
  CHECK_FALSE((*large)->reads_in_loop());
}

TEST_CASE("csv: header, inferred and declared types, quotes, defaults, shards") {
  write("a-0.csv",
        "age,name,score,label\n"
        "31,\"Smith, Jo\",1.5,1\n"
        "40,\"say \"\"hi\"\"\",2,0\r\n"
        ",\"two\nlines\",-3e1,1\n");
  write("a-1.csv", "age,name,score,label\n22,plain,0.25,0\n\n23,5\" \"wide\",1,1\n");
  CsvOptions o;
  o.defaults = {{"age", "-1"}};
  o.types = {{"label", DType::kInt32}};
  auto d = csv(temp_dir() + "/a-*.csv", "label", o, {.batch_size = 10});
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  auto* src = dynamic_cast<const CsvSource*>(d->source.get());
  CHECK(src->type_of("age") == DType::kInt64);
  CHECK(src->type_of("name") == DType::kString);
  CHECK(src->type_of("score") == DType::kFloat32);
  CHECK(src->type_of("label") == DType::kInt32);
  Drained r = drain(*d);
  CHECK(r.end.code() == runtime::Code::kOutOfRange);
  CHECK(r.numbers[0] == std::vector<double>{31, 40, -1, 22, 23});
  // A quote inside a field is text; it opens no quoted field.
  CHECK(r.strings[1] ==
        std::vector<std::string>{"Smith, Jo", "say \"hi\"", "two\nlines", "plain", "5\" \"wide\""});
  CHECK(r.numbers[2] == std::vector<double>{1.5, 2, -30, 0.25, 1});
  CHECK(r.numbers[3] == std::vector<double>{1, 0, 1, 0, 1});
}

TEST_CASE("csv: bad rows name file and line, or are skipped and counted") {
  const std::string path = write("bad.csv", "x,y\n1,2\n3\n4,five\n,6\n7,8\n");
  Drained r = drain(*csv(path, "y", {}, {.batch_size = 2}));
  CHECK(r.end.code() == runtime::Code::kInvalidArgument);
  CHECK(r.end.message().find(path + ":3: expected 2 fields, found 1") != std::string::npos);

  CsvOptions skip;
  skip.skip_bad_records = true;
  Drained s = drain(*csv(path, "y", skip, {.batch_size = 2}));
  CHECK(s.end.code() == runtime::Code::kOutOfRange);
  // "five" makes y a string column: rows 3 (one field) and 5 (x missing) are the bad ones.
  CHECK(s.numbers[0] == std::vector<double>{1, 4, 7});
  CHECK(s.stats.skipped == 2);

  CsvOptions types;
  types.types = {{"y", DType::kInt64}};
  Drained t = drain(*csv(path, "y", types, {.batch_size = 2}));
  CHECK(t.end.message().find(":3:") != std::string::npos);
  CsvOptions rows;
  rows.skip_bad_records = true;
  rows.types = {{"y", DType::kInt64}};
  Drained u = drain(*csv(path, "y", rows, {.batch_size = 2}));
  CHECK(u.stats.skipped == 3);

  const std::string five = write("five.csv", "x,y\n1,2\n4,five\n");
  CsvOptions declared;
  declared.types = {{"y", DType::kFloat32}};
  Drained v = drain(*csv(five, "y", declared, {.batch_size = 2}));
  CHECK(v.end.message().find(five + ":3: column 'y': 'five' is not float32") != std::string::npos);

  const std::string missing = write("missing.csv", "x,y\n1,\n");
  Drained w = drain(*csv(missing, "y", {}, {}));
  CHECK(w.end.message().find(missing + ":2: column 'y' is missing and has no default") !=
        std::string::npos);

  CHECK(csv(temp_dir() + "/nothing-*.csv", "y").status().code() == runtime::Code::kNotFound);
  write("other-0.csv", "x,y\n1,2\n");
  write("other-1.csv", "x,z\n1,2\n");
  CHECK(csv(temp_dir() + "/other-*.csv", "y").status().message().find("header differs") !=
        std::string::npos);
  const std::string open_quote = write("quote.csv", "x,y\n1,\"2\n");
  CHECK(csv(open_quote, "y").status().code() == runtime::Code::kDataLoss);
}

TEST_CASE("csv: a sequence column an example, batched as a sparse tensor; bad values named") {
  // Runs of spaces count once; an empty field is an empty sequence.
  const std::string path = write("seq.csv", "tokens,x,y\n3 1  4,0.5,1\n,1.5,0\n\"2 7\",2.5,1\n");
  CsvOptions o;
  o.sequences = {"tokens"};
  auto d = csv(path, "y", o, {.batch_size = 3});
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(d->sparse == std::vector<std::string>{"tokens"});
  CHECK(d->batch_components() == std::vector<std::string>{"tokens/indices", "tokens/values",
                                                          "tokens/dense_shape", "x", "y"});
  Drained r = drain(*d);
  CHECK(r.end.code() == runtime::Code::kOutOfRange);
  CHECK(r.numbers[0] == std::vector<double>{0, 0, 0, 1, 0, 2, 2, 0, 2, 1});  // one batch
  CHECK(r.numbers[1] == std::vector<double>{3, 1, 4, 2, 7});  // int64, inferred from the values
  CHECK(r.numbers[2] == std::vector<double>{3, 3});
  CHECK(r.numbers[3] == std::vector<double>{0.5, 1.5, 2.5});
  CHECK(r.numbers[4] == std::vector<double>{1, 0, 1});

  const std::string bad = write("seq_bad.csv", "tokens,y\n1 2,1\n3 x 4,0\n");
  CsvOptions ints = o;
  ints.types = {{"tokens", DType::kInt64}};
  Drained e = drain(*csv(bad, "y", ints, {.batch_size = 2}));
  CHECK(e.end.message().find("seq_bad.csv:3: column 'tokens': 'x' is not int64") !=
        std::string::npos);
  CsvOptions label = o;
  label.sequences = {"y"};
  CHECK(csv(path, "y", label).status().message().find("the label 'y' cannot be a sequence") !=
        std::string::npos);
  CsvOptions typo = o;
  typo.sequences = {"tokenz"};
  CHECK(csv(path, "y", typo).status().message().find("no column 'tokenz' to read as a sequence") !=
        std::string::npos);
}

TEST_CASE("libsvm: sparse tensors, dense, and bad lines") {
  const std::string path = write("a.svm", "1 1:0.5 3:2 # first\n-1 2:1\n\n+1 qid:3 1:1 2:2 4:4\n");
  Drained sparse = drain(*libsvm(path, {}, {.batch_size = 3}));
  CHECK(sparse.end.code() == runtime::Code::kOutOfRange);
  CHECK(sparse.batch_sizes == std::vector<int64_t>{3});
  CHECK(sparse.numbers[0] == std::vector<double>{1, -1, 1});
  // "indices" and "values" as sparse tensors of three examples, the longest of 3 entries;
  // feature indices are zero-based.
  CHECK(libsvm(path, {}, {})->batch_components() ==
        std::vector<std::string>{"label", "indices/indices", "indices/values",
                                 "indices/dense_shape", "values/indices", "values/values",
                                 "values/dense_shape"});
  const std::vector<double> entries{0, 0, 0, 1, 1, 0, 2, 0, 2, 1, 2, 2};
  CHECK(sparse.numbers[1] == entries);
  CHECK(sparse.numbers[2] == std::vector<double>{0, 2, 1, 0, 1, 3});
  CHECK(sparse.numbers[3] == std::vector<double>{3, 3});
  CHECK(sparse.numbers[4] == entries);
  CHECK(sparse.numbers[5] == std::vector<double>{0.5, 2, 1, 1, 2, 4});
  CHECK(sparse.numbers[6] == std::vector<double>{3, 3});

  // A sparse component the source does not have is named.
  Dataset typo = *libsvm(path, {}, {});
  typo.sparse.push_back("indexes");
  actors::Runtime rt;
  auto started = Pipeline::start(rt, typo);
  REQUIRE_FALSE(started.ok());
  CHECK(started.status().message().find("no component 'indexes'") != std::string::npos);

  Drained dense = drain(*libsvm(path, {.dense = true}, {.batch_size = 3}));
  CHECK(dense.numbers[1] == std::vector<double>{0.5, 0, 2, 0, 0, 1, 0, 0, 1, 2, 0, 4});

  const std::string bad = write("bad.svm", "1 1:2\n1 x:2\n");
  Drained b = drain(*libsvm(bad, {}, {}));
  CHECK(b.end.message().find(bad + ":2") != std::string::npos);
  Drained narrow = drain(*libsvm(path, {.dense = true, .num_features = 2}, {}));
  CHECK(narrow.end.message().find(path + ":1: feature index 3 is beyond the 2 features") !=
        std::string::npos);
  Drained skipped = drain(*libsvm(bad, {.skip_bad_records = true}, {}));
  CHECK(skipped.stats.skipped == 1);
  CHECK(skipped.numbers[0] == std::vector<double>{1});
  // An index too large to make dense rows of is named with its file and line.
  const std::string huge = write("huge.svm", "1 1:1\n0 2:1 9000000000:1\n1 3:1\n");
  auto wide = libsvm(huge, {.dense = true}, {});
  REQUIRE_FALSE(wide.ok());
  CHECK_MESSAGE(wide.status().message().find(huge + ":2: dense rows of") == 0,
                wide.status().message());

  // Labels as class names ("+1" is "1"), dense or sparse, a bad line skipped or not.
  const std::string half = write("half.svm", "2.5 1:1\n+1 1:2\nbad\n-1 2:1\n");
  for (bool dense : {true, false}) {
    auto p = Pipeline::start(
        rt, *libsvm(half, {.dense = dense, .text_labels = true, .skip_bad_records = true},
                    {.batch_size = 3}));
    REQUIRE(p.ok());
    auto b = (*p)->next();
    REQUIRE(b.ok());
    CHECK((*b)[0].to_vector<std::string>() == std::vector<std::string>{"2.5", "1", "-1"});
  }
}

TEST_CASE("record files: round trip, corrupt and truncated records") {
  std::vector<int64_t> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i;
  auto cols = ColumnsSource::create("arrays", {{"k", Tensor::from_vector(Shape{100}, v)}}, 30);
  REQUIRE(cols.ok());
  const std::string path = temp_dir() + "/k.trec";
  REQUIRE(write_record_file(**cols, path).ok());
  Drained r = drain(*records(path, "", {.batch_size = 40}));
  CHECK(r.end.code() == runtime::Code::kOutOfRange);
  CHECK(r.numbers[0].size() == 100);
  CHECK(r.numbers[0][99] == 99);

  std::string bytes;
  REQUIRE(runtime::read_file(path, &bytes).ok());
  // Flip a byte inside the second record's data: its checksum fails.
  auto src = RecordSource::open(path);
  REQUIRE(src.ok());
  CHECK((*src)->num_units() == 4);
  std::string corrupt = bytes;
  const size_t second = bytes.size() / 4 + 60;
  corrupt[second] ^= 0x40;
  const std::string bad_path = write("corrupt.trec", corrupt);
  Drained c = drain(*records(bad_path, "", {.batch_size = 40}));
  CHECK(c.end.code() == runtime::Code::kDataLoss);
  CHECK(c.end.message().find(bad_path + ": record at byte ") != std::string::npos);
  Drained skip = drain(*records(bad_path, "", {.batch_size = 40, .skip_bad_records = true}));
  CHECK(skip.end.code() == runtime::Code::kOutOfRange);
  CHECK(skip.stats.skipped == 1);
  CHECK(skip.numbers[0].size() == 70);

  // A damaged length in the middle loses that record only: the reader finds the next frame by
  // its checksum and counts the one it lost.
  std::vector<uint64_t> starts;
  {
    runtime::RecordReader frames(bytes.data(), bytes.size(), path);
    std::string_view rec;
    for (uint64_t at = frames.offset(); *frames.next(&rec); at = frames.offset()) {
      starts.push_back(at);
    }
  }
  REQUIRE(starts.size() == 4);
  std::string bad_length = bytes;
  bad_length[starts[1] + 2] ^= 0x01;
  const std::string length_path = write("length.trec", bad_length);
  auto refused = records(length_path, "");
  CHECK(refused.status().code() == runtime::Code::kDataLoss);
  CHECK(refused.status().message().find("corrupt record length at byte " +
                                        std::to_string(starts[1])) != std::string::npos);
  Drained resynced = drain(*records(length_path, "", {.batch_size = 40, .skip_bad_records = true}));
  CHECK(resynced.end.code() == runtime::Code::kOutOfRange);
  CHECK(resynced.numbers[0].size() == 70);  // the second record's 30 rows lost, no more
  CHECK(resynced.stats.skipped == 1);
  CHECK(resynced.numbers[0][30] == 60);

  const std::string cut = write("cut.trec", bytes.substr(0, bytes.size() - 10));
  auto truncated = records(cut, "");
  CHECK(truncated.status().code() == runtime::Code::kDataLoss);
  CHECK(truncated.status().message().find("truncated record at byte") != std::string::npos);
  // With skip_bad_records the unreadable tail is reported as a skipped record, not dropped
  // silently: the whole records are read, the last one counted.
  Drained tail = drain(*records(cut, "", {.batch_size = 40, .skip_bad_records = true}));
  CHECK(tail.end.code() == runtime::Code::kOutOfRange);
  CHECK(tail.numbers[0].size() == 90);
  CHECK(tail.stats.skipped == 1);
  CHECK(records(temp_dir() + "/none.trec", "").status().code() == runtime::Code::kNotFound);
}

TEST_CASE("train_test_split: disjoint, complete, seeded") {
  std::vector<int64_t> v(50);
  for (int i = 0; i < 50; ++i) v[i] = i;
  Tensor k = Tensor::from_vector(Shape{50}, v);
  auto s = train_test_split({{"k", k}}, 0.2, 9);
  REQUIRE(s.ok());
  auto train = s->first[0].second.to_vector<int64_t>();
  auto test = s->second[0].second.to_vector<int64_t>();
  CHECK(test.size() == 10);
  CHECK(train.size() == 40);
  std::set<int64_t> all(train.begin(), train.end());
  all.insert(test.begin(), test.end());
  CHECK(all.size() == 50);
  CHECK(train_test_split({{"k", k}}, 0.2, 9)->second[0].second.to_vector<int64_t>() == test);
  CHECK(!train_test_split({{"k", k}}, 1.5).ok());
}

TEST_CASE("fashion_mnist: the Debian dataset through the pipeline") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
    MESSAGE("dataset-fashion-mnist is not installed; skipped");
    return;
  }
  auto d = fashion_mnist("test", {.batch_size = 128});
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  actors::Runtime rt;
  auto p = Pipeline::start(rt, *d);
  auto b = (*p)->next();
  REQUIRE(b.ok());
  CHECK((*b)[0].shape() == Shape{128, 784});
  CHECK((*b)[1].dtype() == DType::kInt64);
  CHECK(fashion_mnist("validation").status().code() == runtime::Code::kInvalidArgument);
  CHECK(fashion_mnist("test", {}, "/nonexistent").status().code() == runtime::Code::kNotFound);
}

TEST_CASE("arrays from Eigen matrices and vectors") {
  Eigen::MatrixXf x(3, 2);
  x << 1, 2, 3, 4, 5, 6;  // column-major storage, rows out
  Eigen::Matrix<int64_t, Eigen::Dynamic, 1> y(3);
  y << 7, 8, 9;
  CHECK(column(x).shape() == Shape{3, 2});
  CHECK(column(x).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(column(y).shape() == Shape{3});
  Drained r = drain(*arrays({{"x", column(x)}, {"y", column(y)}}, "y", {.batch_size = 2}));
  CHECK(r.numbers[0] == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(r.numbers[1] == std::vector<double>{7, 8, 9});
}

namespace {

// A source that counts its reads.
class CountingSource : public actors::Source {
 public:
  explicit CountingSource(std::shared_ptr<const actors::Source> base) : base_(std::move(base)) {}
  std::string name() const override { return base_->name(); }
  std::vector<std::string> components() const override { return base_->components(); }
  int64_t num_units() const override { return base_->num_units(); }
  runtime::Status read(int64_t unit, std::vector<actors::Chunk>* out,
                       int64_t* skipped) const override {
    ++reads;
    return base_->read(unit, out, skipped);
  }
  mutable std::atomic<int> reads{0};

 private:
  std::shared_ptr<const actors::Source> base_;
};

}  // namespace

TEST_CASE("a worker's slice of a unit smaller than the shards is read once, then kept") {
  // One unit of 100 rows and 4 workers: each worker reads the unit for its 25 rows.
  std::vector<double> x(100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  auto columns = ColumnsSource::create("x", {{"x", Tensor::from_vector<double>(Shape{100}, x)}});
  REQUIRE(columns.ok());
  auto counting = std::make_shared<CountingSource>(std::move(*columns));
  auto data = arrays({{"x", Tensor::from_vector<double>(Shape{100}, x)}}, "", {.batch_size = 10});
  REQUIRE(data.ok());
  data->source = counting;
  auto part = shard(*data, 4, 1);
  REQUIRE(part.ok());
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<actors::Chunk> chunks;
    int64_t skipped = 0;
    REQUIRE(part->source->read(0, &chunks, &skipped).ok());
    REQUIRE(chunks.size() == 1);
    // Its own 25 rows, 25 to 49, in a tensor of their own (not a view of the whole unit).
    CHECK(chunks[0].first() == 0);
    CHECK(chunks[0].last() == 25);
    CHECK(chunks[0].components[0].to_vector<double>() ==
          std::vector<double>(x.begin() + 25, x.begin() + 50));
  }
  CHECK(counting->reads == 1);
}

TEST_CASE("shards of a dataset are disjoint and together hold every example, by units or rows") {
  // 3000 rows: three units of 1024 rows, so 2 workers split units and 4 split rows.
  std::vector<double> x(3000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  auto data = arrays({{"x", Tensor::from_vector<double>(Shape{3000}, x)}}, "", {.batch_size = 100});
  REQUIRE(data.ok());
  for (int n : {1, 2, 4}) {
    std::multiset<double> seen;
    for (int i = 0; i < n; ++i) {
      auto part = shard(*data, n, i);
      REQUIRE_MESSAGE(part.ok(), part.status().to_string());
      Drained d = drain(*part);
      REQUIRE_MESSAGE(d.end.code() == runtime::Code::kOutOfRange, d.end.to_string());
      // By units (2 workers): 1976 and 1024 rows; by rows (4 workers): 750 each.
      CHECK_MESSAGE(d.numbers[0].size() >= 750, n, " workers: part ", i, " holds ",
                    d.numbers[0].size());
      seen.insert(d.numbers[0].begin(), d.numbers[0].end());
    }
    CHECK(seen.size() == 3000);
    CHECK(std::set<double>(seen.begin(), seen.end()).size() == 3000);
  }
  CHECK(shard(*data, 2, 2).status().message().find("[0, 2)") != std::string::npos);
}
