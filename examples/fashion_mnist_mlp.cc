// Trains a 784-256-10 MLP on Fashion-MNIST with the graph API on actors: every node of the graph
// is a node actor, the variables live in a parameter shard, and each epoch is one run_loop that
// drives its steps inside the actor system. Then evaluates on the 10k test images.
// Data: Debian's dataset-fashion-mnist package.
//
//   fashion_mnist_mlp [--epochs 3] [--batch-size 128] [--hidden 256] [--learning-rate 0.001]
//                     [--seed 42] [--data-dir /usr/share/datasets/fashion-mnist]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "estimators/input/idx_file.h"
#include "troupe/troupe.h"

using namespace troupe;
using runtime::DType;
using runtime::Output;
using runtime::Shape;
using runtime::Tensor;

namespace {

struct Options {
  int epochs = 3;
  int batch_size = 128;
  int hidden = 256;
  double learning_rate = 1e-3;
  int64_t seed = 42;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "error: %s needs a value\n", flag.c_str());
      return false;
    }
    std::string v = argv[++i];
    try {
      if (flag == "--epochs") {
        o->epochs = std::stoi(v);
      } else if (flag == "--batch-size") {
        o->batch_size = std::stoi(v);
      } else if (flag == "--hidden") {
        o->hidden = std::stoi(v);
      } else if (flag == "--learning-rate") {
        o->learning_rate = std::stod(v);
      } else if (flag == "--seed") {
        o->seed = std::stoll(v);
      } else if (flag == "--data-dir") {
        o->data_dir = v;
      } else {
        std::fprintf(stderr, "error: unknown flag %s\n", flag.c_str());
        return false;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "error: %s: '%s' is not a number\n", flag.c_str(), v.c_str());
      return false;
    }
  }
  if (o->epochs < 1 || o->batch_size < 1 || o->hidden < 1) {
    std::fprintf(stderr, "error: --epochs, --batch-size and --hidden must be positive\n");
    return false;
  }
  return true;
}

// Images as float32 [n, 784] in [0, 1]; labels as int32 [n].
bool load(const std::string& dir, const std::string& split, Tensor* x, Tensor* y) {
  auto images = estimators::input::read_idx(dir + "/" + split + "-images-idx3-ubyte.gz");
  auto labels = estimators::input::read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz");
  for (const auto* r : {&images, &labels}) {
    if (!r->ok()) {
      std::fprintf(stderr, "error: %s\n", r->status().to_string().c_str());
      return false;
    }
  }
  const int64_t n = images->dim(0);
  if (labels->dim(0) != n) {
    std::fprintf(stderr, "error: %s: %lld images but %lld labels\n", split.c_str(), (long long)n,
                 (long long)labels->dim(0));
    return false;
  }
  *x = Tensor(DType::kFloat32, Shape{n, 784});
  *y = Tensor(DType::kInt32, Shape{n});
  const uint8_t* px = images->data<uint8_t>();
  for (int64_t i = 0; i < n * 784; ++i) x->data<float>()[i] = px[i] / 255.0f;
  for (int64_t i = 0; i < n; ++i) y->data<int32_t>()[i] = labels->data<uint8_t>()[i];
  return true;
}

void gather_rows(const Tensor& x, const Tensor& y, const std::vector<int64_t>& order, int64_t begin,
                 int64_t count, Tensor* bx, Tensor* by) {
  *bx = Tensor(DType::kFloat32, Shape{count, 784});
  *by = Tensor(DType::kInt32, Shape{count});
  for (int64_t i = 0; i < count; ++i) {
    int64_t r = order[begin + i];
    std::memcpy(bx->data<float>() + i * 784, x.data<float>() + r * 784, 784 * sizeof(float));
    by->data<int32_t>()[i] = y.data<int32_t>()[r];
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) return 2;
  Tensor train_x, train_y, test_x, test_y;
  if (!load(opt.data_dir, "train", &train_x, &train_y) ||
      !load(opt.data_dir, "t10k", &test_x, &test_y)) {
    return 1;
  }

  runtime::Graph graph;
  graph.set_seed(opt.seed);
  runtime::GraphBuilder b(&graph);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{-1, 784}, "images");
  Output labels = ops::placeholder(b, DType::kInt32, Shape{-1}, "labels");
  Output logits;
  {
    auto scope = b.name_scope("hidden");
    Output w = ops::variable(b, "kernel", Shape{784, opt.hidden}, DType::kFloat32,
                             ops::glorot_uniform(b, Shape{784, opt.hidden}));
    Output bias = ops::variable(b, "bias", Shape{opt.hidden}, DType::kFloat32,
                                ops::zeros(b, Shape{opt.hidden}, DType::kFloat32));
    logits = ops::relu(b, ops::bias_add(b, ops::matmul(b, x, w), bias));
  }
  {
    auto scope = b.name_scope("logits");
    Output w = ops::variable(b, "kernel", Shape{opt.hidden, 10}, DType::kFloat32,
                             ops::glorot_uniform(b, Shape{opt.hidden, 10}));
    Output bias = ops::variable(b, "bias", Shape{10}, DType::kFloat32,
                                ops::zeros(b, Shape{10}, DType::kFloat32));
    logits = ops::bias_add(b, ops::matmul(b, logits, w), bias);
  }
  Output loss =
      ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, labels, logits));
  Output correct = ops::equal(b, ops::argmax(b, logits, 1, DType::kInt32), labels);
  Output accuracy = ops::reduce_mean(b, ops::cast(b, correct, DType::kFloat32));
  int train_op = ops::minimize(b, loss, ops::Optimizer::adam(opt.learning_rate));
  int init = ops::global_variables_initializer(b);
  if (!b.ok()) {
    std::fprintf(stderr, "error building the graph: %s\n", b.status().to_string().c_str());
    return 1;
  }

  actors::Runtime rt;
  auto session = actors::Session::create(rt, graph);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().to_string().c_str());
    return 1;
  }
  actors::Session& sess = **session;
  if (auto r = sess.run({}, {}, {init}); !r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
    return 1;
  }

  const int64_t n = train_x.dim(0);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(opt.seed);
  std::printf(
      "training a 784-%d-10 MLP on %lld Fashion-MNIST images, %d epochs, batch %d, Adam(%g)\n",
      opt.hidden, (long long)n, opt.epochs, opt.batch_size, opt.learning_rate);
  auto start = std::chrono::steady_clock::now();
  const int64_t steps_per_epoch = (n + opt.batch_size - 1) / opt.batch_size;
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0;
    actors::LoopRequest loop;
    loop.steps = steps_per_epoch;
    loop.fetches = {loss};
    loop.targets = {train_op};
    loop.feed = [&](int64_t step, runtime::FeedList* feeds) {
      const int64_t begin = step * opt.batch_size;
      Tensor bx, by;
      gather_rows(train_x, train_y, order, begin, std::min<int64_t>(opt.batch_size, n - begin), &bx,
                  &by);
      *feeds = {{x, bx}, {labels, by}};
      return runtime::ok_status();
    };
    loop.on_step = [&](int64_t, const std::vector<Tensor>& values) {
      loss_sum += values[0].data<float>()[0];
      return true;
    };
    auto done = sess.run_loop(std::move(loop));
    if (!done.ok()) {
      std::fprintf(stderr, "error: %s\n", done.status().to_string().c_str());
      return 1;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("epoch %d: mean loss = %.4f (%.1f s, %.0f examples/s)\n", epoch,
                loss_sum / steps_per_epoch, secs, epoch * n / secs);
  }

  Tensor bx, by;
  double correct_sum = 0, loss_sum = 0;
  const int64_t m = test_x.dim(0);
  std::vector<int64_t> identity(m);
  std::iota(identity.begin(), identity.end(), 0);
  for (int64_t begin = 0; begin < m; begin += 1000) {
    int64_t count = std::min<int64_t>(1000, m - begin);
    gather_rows(test_x, test_y, identity, begin, count, &bx, &by);
    auto r = sess.run({{x, bx}, {labels, by}}, {accuracy, loss});
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
      return 1;
    }
    correct_sum += (*r)[0].data<float>()[0] * count;
    loss_sum += (*r)[1].data<float>()[0] * count;
  }
  std::printf("{\"accuracy\": %.4f, \"loss\": %.4f, \"epochs\": %d}\n", correct_sum / m,
              loss_sum / m, opt.epochs);
  return 0;
}
