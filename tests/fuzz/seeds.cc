// fuzz_seeds DIR: writes a seed corpus for every fuzz target, DIR/<target>/<n>, made with the
// same encoders and file writers the tests use, so fuzzing starts from inputs that get deep.
// tools/dev fuzz runs it for a target whose corpus in tests/fuzz/corpus is missing.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "actors/shard_codec.h"
#include "estimators/input/columns_source.h"
#include "estimators/input/record_file.h"
#include "estimators/input/tfrecord_source.h"
#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/checkpoint.h"
#include "runtime/graph_codec.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_codec.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

std::string g_dir;

void put(const std::string& target, int n, const std::string& bytes) {
  std::filesystem::create_directories(g_dir + "/" + target);
  std::ofstream(g_dir + "/" + target + "/seed-" + std::to_string(n), std::ios::binary) << bytes;
}
void put(const std::string& target, int n, const std::vector<char>& bytes) {
  put(target, n, std::string(bytes.begin(), bytes.end()));
}
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small classifier's training graph: the ops a ps and a worker run.
runtime::Graph training_graph() {
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 4}, "x");
  Output y = ops::placeholder(b, DType::kInt32, Shape{-1}, "y");
  Output w =
      ops::variable(b, "w", Shape{4, 3}, DType::kFloat32, ops::glorot_uniform(b, Shape{4, 3}));
  Output bias =
      ops::variable(b, "b", Shape{3}, DType::kFloat32, ops::zeros(b, Shape{3}, DType::kFloat32));
  Output logits = ops::bias_add(b, ops::matmul(b, ops::relu(b, x), w), bias);
  Output loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, y, logits));
  ops::minimize(b, loss, ops::Optimizer::adam(0.01));
  ops::global_variables_initializer(b);
  if (!b.ok()) std::fprintf(stderr, "seeds: %s\n", b.status().to_string().c_str());
  return g;
}

Tensor random_like(DType dtype, const Shape& shape, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (int64_t d : shape.rank_known() ? shape.dims() : std::vector<int64_t>{2}) {
    dims.push_back(d < 0 ? 2 : d);
  }
  Tensor t(dtype == DType::kInvalid ? DType::kFloat32 : dtype, Shape(dims));
  if (t.dtype() == DType::kString) return t;
  runtime::visit_numeric(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<T>()[i] = static_cast<T>(rng() % 3);
  });
  return t;
}

void tensors() {
  int n = 0;
  std::vector<char> blob;
  for (const Tensor& t :
       {Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4}), Tensor::scalar<int64_t>(7),
        Tensor::from_vector<double>(Shape{3}, {0.5, 1, 2}),
        Tensor::from_vector<std::string>(Shape{2}, {"a", "bc"}),
        Tensor::from_vector<uint8_t>(Shape{1, 3}, {0, 1, 255})}) {
    runtime::encode_tensor(t, &blob);
    put("tensor_codec", n++, blob);
  }
}

void graphs_and_shard_calls() {
  runtime::Graph g = training_graph();
  std::vector<char> blob;
  runtime::encode_graph(g, &blob);
  put("graph_codec", 0, blob);
  std::mt19937 rng(3);
  int n = 0;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const runtime::Node& node = g.node(id);
    std::vector<Tensor> inputs;
    for (const Output& in : node.inputs)
      inputs.push_back(random_like(g.dtype(in), g.shape(in), rng));
    if (actors::encode_shard_call(g, node, inputs, &blob).ok()) put("shard_call", n++, blob);
  }
  // A read carrying the others (a step's reads of one task in one call).
  std::vector<const runtime::Node*> reads;
  for (int id : g.variables()) reads.push_back(&g.node(id));
  if (reads.size() > 1) {
    const runtime::Node& first = *reads.front();
    reads.erase(reads.begin());
    if (actors::encode_shard_call(g, first, {}, &blob, {.reads = reads}).ok()) {
      put("shard_call", n++, blob);
    }
  }
  // An update carrying the others (a step's updates of one task in one call), as a replica of
  // synchronous training sends it.
  std::vector<const runtime::Node*> updates;
  std::vector<Tensor> inputs;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const runtime::Node& node = g.node(id);
    if (node.def->variable_access != runtime::VariableAccess::kWrite || node.op == "Assign") {
      continue;
    }
    updates.push_back(&node);
    for (const Output& in : node.inputs)
      inputs.push_back(random_like(g.dtype(in), g.shape(in), rng));
  }
  if (updates.size() > 1) {
    const runtime::Node& first = *updates.front();
    updates.erase(updates.begin());
    actors::ShardCallExtras extras{{0, 1, 100}, true, {}, updates};
    if (actors::encode_shard_call(g, first, inputs, &blob, extras).ok()) {
      put("shard_call", n++, blob);
    }
  }
}

void checkpoints(const std::string& scratch) {
  runtime::CheckpointData d;
  d.global_step = 7;
  d.tensors["w"] = Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4});
  d.tensors["w/Adam_m"] = Tensor::from_vector<float>(Shape{2, 2}, {0, 0, 0, 0});
  d.tensors["w/Adam_t"] = Tensor::scalar<float>(1);
  d.tensors["global_step"] = Tensor::scalar<int64_t>(7);
  d.metrics["loss"] = 0.25;
  runtime::write_checkpoint(scratch + "/ckpt", d);
  put("checkpoint", 0, slurp(scratch + "/ckpt"));
}

void text_files(const std::string& scratch) {
  put("csv", 0, std::string("\x00", 1) + "x,y,name\n1,2.5,a\n3,4,\"b,c\"\n5,,d\n");
  put("csv", 1, std::string("\x13", 1) + "1;2;x\n\n3;4;\"y\"\"z\"\n");
  // troupe serve's bodies: the first byte picks the verb (0 predict, 1 classify, 2 regress).
  put("rest_api", 0, std::string("\x00", 1) + R"({"instances": [[1.0, 2.0, 3.0], [4, 5, 6]]})");
  put("rest_api", 1,
      std::string("\x00", 1) +
          R"({"signature_name": "mixed", "inputs": {"x": [[1, 2, 3]], "k": [7], "s": [{"b64": "aGk="}]}})");
  put("rest_api", 2,
      std::string("\x01", 1) + R"({"examples": [{"x": [1.5, 2, 3]}], "context": {}})");
  put("rest_api", 3, std::string("\x02", 1) + R"({"examples": [{}], "context": {"x": [1, 2, 3]}})");
  put("rest_api", 4, std::string("\x03", 1) + "m/versions/1/metadata");
  // A stranger's hello and proof; a server's answer of the right length.
  put("handshake", 0,
      "TRPB" + std::string(32, 'n') + std::string(8, 'k') + std::string("/job:worker/task:0") +
          std::string(46, '\0') + std::string("/job:ps/task:0") + std::string(50, '\0') +
          std::string(32, 'p'));
  put("handshake", 1, std::string(128, 'a'));
  // Sealed records: as sealed (nothing xored), one bit flipped, a raw wire.
  put("sealed_record", 0, std::string("\x01", 1) + std::string(64, '\0'));
  put("sealed_record", 1, std::string("\x01", 1) + std::string(40, '\0') + "\x08");
  put("sealed_record", 2, std::string("\x00\x0b\0\0\0", 5) + std::string(27, 'w'));
  put("libsvm", 0, std::string("\x01", 1) + "1 1:0.5 3:2\n0 2:1 # comment\n-1 4:3.5\n");
  put("libsvm", 1, std::string("\x06", 1) + "2 0:1 7:2\n1 3:0.25\n");
  const std::string idx("\0\0\x08\x02\0\0\0\x02\0\0\0\x03\x01\x02\x03\x04\x05\x06", 18);
  put("idx", 0, idx);
  gzFile f = gzopen((scratch + "/idx.gz").c_str(), "wb");
  gzwrite(f, idx.data(), static_cast<unsigned>(idx.size()));
  gzclose(f);
  put("idx", 1, slurp(scratch + "/idx.gz"));
  auto cols = estimators::input::ColumnsSource::create(
      "seed",
      {{"x", Tensor::from_vector<float>(Shape{6, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})},
       {"y", Tensor::from_vector<int64_t>(Shape{6}, {0, 1, 0, 1, 1, 0})}},
      2);
  if (cols.ok() && estimators::input::write_record_file(**cols, scratch + "/r.trec").ok()) {
    put("record_file", 0, slurp(scratch + "/r.trec"));
  }
  // tfrecord's first byte: 1 gzip, 2 the given spec (tfrecord_fuzz.cc).
  if (cols.ok() && estimators::input::write_tfrecord(**cols, scratch + "/t.tfrecord").ok() &&
      estimators::input::write_tfrecord(**cols, scratch + "/t.tfrecord.gz").ok()) {
    put("tfrecord", 0, std::string("\x00", 1) + slurp(scratch + "/t.tfrecord"));
    put("tfrecord", 1, std::string("\x03", 1) + slurp(scratch + "/t.tfrecord.gz"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  g_dir = argv[1];
  const std::string scratch = g_dir + "/.scratch";
  std::filesystem::create_directories(scratch);
  tensors();
  graphs_and_shard_calls();
  checkpoints(scratch);
  text_files(scratch);
  std::filesystem::remove_all(scratch);
  return 0;
}
