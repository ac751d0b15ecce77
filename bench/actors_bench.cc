// The actor runtime's bars (DESIGN.md §7), each printed as a BAR line and written to JSON:
//   node_hop        median time per node on a chain of 100 no-op nodes    bar <= 0.5 us
//   tiny_mlp_step   10-16-3 MLP, batch 8, one SGD step, median us           bar <= 15 us
//   mlp_throughput  784-512-512-10, batch 128, SGD, examples/s, against a hand-written loop on
//                   the same GEMM (bar >= 0.95) and libtorch (bar >= 1.1; see torch_peer)
//   tensor_loopback 4 MiB tensors to a server process over 127.0.0.1, GB/s  bar >= 2.5
// and, to show what the CAF configuration buys, the hop and tiny step again on CAF's defaults,
// and the hop with CAF's own worker loop instead of the quiet one (actors/scheduler.h), and the
// MLPs and a small CNN without op fusion (runtime/remapper.h).
//
//   actors_bench [--json bench_actors.json] [--torch-json DIR] [--quick]
//                [--only hop|tiny|mlp|cnn|loopback]  (one part, for profiling it)
// With --torch-json, the libtorch figures that torch_peer wrote there are the peers of the tiny
// and the big MLP bars (torch_peer runs in its own process, in its own best configuration).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <random>
#include <string>

#include "actors/job_secret.h"
#include "actors/server.h"
#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "kernels/cpu/gemm.h"
#include "troupe/troupe.h"

using namespace troupe;
using namespace troupe::runtime;

namespace {

bool quick = false;

// The "value" of the first bar in a JSON file written by bench::Bars; 0 when absent.
double read_bar_value(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* v = std::strstr(buf, "\"value\": ");
  return v ? std::atof(v + 9) : 0;
}

// `steps` pipelined steps through run_loop, each fed `feeds`.
void run_steps(actors::Session& s, int64_t steps, const runtime::FeedList& feeds,
               const std::vector<Output>& fetches, const std::vector<int>& targets) {
  actors::LoopRequest loop;
  loop.steps = steps;
  loop.fetches = fetches;
  loop.targets = targets;
  loop.feed = [&](int64_t, runtime::FeedList* f) {
    *f = feeds;
    return runtime::ok_status();
  };
  auto r = s.run_loop(std::move(loop));
  if (!r.ok()) std::fprintf(stderr, "loop failed: %s\n", r.status().to_string().c_str());
}

// Seconds per step of `steps` pipelined steps through run_loop (median of windows).
double loop_seconds_per_step(actors::Session& s, int64_t steps, const runtime::FeedList& feeds,
                             const std::vector<Output>& fetches, const std::vector<int>& targets) {
  auto once = [&] { run_steps(s, steps, feeds, fetches, targets); };
  return bench::median_seconds(once, quick ? 3 : 7, quick ? 0.05 : 0.3) / steps;
}

// The floor under node_hop: a chain of 100 bare CAF actors forwarding one struct with
// self->send, no kernels, no credits, on the same CAF configuration.
struct Token {
  uint64_t step = 0;
  Tensor value;
};
}  // namespace
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(Token)
namespace {

double raw_caf_hop_us(actors::RuntimeOptions options) {
  actors::Runtime rt(options);
  caf::actor_system& sys = rt.system();
  const int kChain = 100, kSteps = quick ? 2000 : 20000;
  // A ring: the last actor starts the next round itself, so only the first send and the last
  // reply cross threads (a wake-up costs tens of microseconds, more than the whole round).
  std::vector<caf::actor> chain(kChain);
  caf::scoped_actor main_self{sys};
  caf::actor reply_to = main_self;
  auto first = std::make_shared<caf::actor>();
  for (int i = kChain - 1; i >= 0; --i) {
    caf::actor next = i + 1 < kChain ? chain[i + 1] : caf::actor();
    chain[i] =
        sys.spawn([next, first, reply_to, kSteps](caf::event_based_actor* self) -> caf::behavior {
          return {[self, next, first, reply_to, kSteps](Token& t) {
            if (next) {
              self->send(next, std::move(t));
            } else if (++t.step < uint64_t(kSteps)) {
              self->send(*first, std::move(t));
            } else {
              self->send(reply_to, std::move(t));
            }
          }};
        });
  }
  *first = chain[0];
  auto once = [&] {
    main_self->send(chain[0], Token{0, Tensor()});
    main_self->receive([](Token&) {});
  };
  double per_round = bench::median_seconds(once, quick ? 3 : 5, 0.05) / kSteps;
  for (auto& a : chain) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  *first = caf::actor{};  // the ring holds its first actor: break the cycle so that it can go
  return per_round / kChain * 1e6;
}

double node_hop_us(actors::RuntimeOptions options) {
  actors::Runtime rt(options);
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{}, "x");
  Output chain = x;
  for (int i = 0; i < 100; ++i) chain = ops::identity(b, chain);
  auto s = actors::Session::create(rt, g, {.pipeline_depth = 1});
  double per_step = loop_seconds_per_step(**s, 2000, {{x, Tensor::scalar<float>(1)}}, {chain}, {});
  return per_step / 100 * 1e6;
}

// A model a bench runs: its graph, the batch it is fed at every step, and what a step runs.
struct Model {
  runtime::Graph g;
  Output x, y, logits, loss;
  int train = -1, init = -1;
  runtime::FeedList feeds;
};

// x and y for `batch` examples of `shape` in [0, 1) with labels below `classes`.
void random_batch(Model& m, const Shape& shape, int64_t classes) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor xv(DType::kFloat32, shape);
  for (int64_t i = 0; i < xv.num_elements(); ++i) xv.data<float>()[i] = u(rng);
  Tensor yv(DType::kInt32, Shape{shape.dim(0)});
  for (int64_t i = 0; i < shape.dim(0); ++i) yv.data<int32_t>()[i] = int32_t(rng() % classes);
  m.feeds = {{m.x, xv}, {m.y, yv}};
}

void finish_classifier(runtime::GraphBuilder& b, Model& m) {
  m.loss = ops::reduce_mean(b, ops::sparse_softmax_cross_entropy_with_logits(b, m.y, m.logits));
  m.train = ops::minimize(b, m.loss, ops::Optimizer::sgd(0.01));
  m.init = ops::global_variables_initializer(b);
}

void build_mlp(Model& m, const std::vector<int64_t>& sizes, int64_t batch) {
  m.g.set_seed(1);
  runtime::GraphBuilder b(&m.g);
  m.x = ops::placeholder(b, DType::kFloat32, Shape{batch, sizes[0]}, "x");
  m.y = ops::placeholder(b, DType::kInt32, Shape{batch}, "y");
  Output h = m.x;
  for (size_t i = 1; i < sizes.size(); ++i) {
    auto scope = b.name_scope("layer" + std::to_string(i));
    Shape ws{sizes[i - 1], sizes[i]};
    Output w = ops::variable(b, "w", ws, DType::kFloat32, ops::glorot_uniform(b, ws));
    Output bias = ops::variable(b, "b", Shape{sizes[i]}, DType::kFloat32,
                                ops::zeros(b, Shape{sizes[i]}, DType::kFloat32));
    h = ops::bias_add(b, ops::matmul(b, h, w), bias);
    if (i + 1 < sizes.size()) h = ops::relu(b, h);
  }
  m.logits = h;
  finish_classifier(b, m);
  random_batch(m, Shape{batch, sizes[0]}, sizes.back());
}

// Two 3x3 convolutions (32 and 64 filters, each with bias, Relu and 2x2 max pooling) and a
// dense layer on 28x28 images: a small Fashion-MNIST CNN.
void build_cnn(Model& m, int64_t batch) {
  m.g.set_seed(1);
  runtime::GraphBuilder b(&m.g);
  m.x = ops::placeholder(b, DType::kFloat32, Shape{batch, 28, 28, 1}, "x");
  m.y = ops::placeholder(b, DType::kInt32, Shape{batch}, "y");
  Output h = m.x;
  int64_t channels = 1;
  for (int64_t filters : {32, 64}) {
    auto scope = b.name_scope("conv" + std::to_string(filters));
    Shape ws{3, 3, channels, filters};
    Output w = ops::variable(b, "w", ws, DType::kFloat32, ops::glorot_uniform(b, ws));
    Output bias = ops::variable(b, "b", Shape{filters}, DType::kFloat32,
                                ops::zeros(b, Shape{filters}, DType::kFloat32));
    h = ops::relu(b, ops::bias_add(b, ops::conv2d(b, h, w, {1, 1}, "SAME"), bias));
    h = ops::max_pool(b, h, {2, 2}, {2, 2}, "VALID");
    channels = filters;
  }
  Shape ws{7 * 7 * 64, 10};
  Output w = ops::variable(b, "dense/w", ws, DType::kFloat32, ops::glorot_uniform(b, ws));
  m.logits = ops::matmul(b, ops::reshape(b, h, {-1, 7 * 7 * 64}), w);
  finish_classifier(b, m);
  random_batch(m, Shape{batch, 28, 28, 1}, 10);
}

double mlp_seconds_per_step(actors::RuntimeOptions options, const std::vector<int64_t>& sizes,
                            int64_t batch, int64_t steps) {
  actors::Runtime rt(options);
  Model m;
  build_mlp(m, sizes, batch);
  auto s = actors::Session::create(rt, m.g);
  (void)(*s)->run({}, {}, {m.init});
  return loop_seconds_per_step(**s, steps, m.feeds, {}, {m.train});
}

// What op fusion buys: unfused time over fused time for training steps (or, with `inference`,
// steps that fetch the logits), as the median over pairs of alternating windows on one runtime
// (one loop of `steps` each). Measured one after the other, the two drift apart with the host's
// speed by more than fusion changes. `fused_seconds`: the fused step's median time.
double fusion_speedup(const Model& m, int64_t steps, int pairs, bool inference = false,
                      double* fused_seconds = nullptr) {
  actors::Runtime rt;
  auto fused = actors::Session::create(rt, m.g, {.fuse_ops = true});
  auto plain = actors::Session::create(rt, m.g, {.fuse_ops = false});
  (void)(*fused)->run({}, {}, {m.init});
  (void)(*plain)->run({}, {}, {m.init});
  auto window = [&](actors::Session& s) {
    const auto start = std::chrono::steady_clock::now();
    if (inference) {
      run_steps(s, steps, m.feeds, {m.logits}, {});
    } else {
      run_steps(s, steps, m.feeds, {}, {m.train});
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  window(**fused);  // warm up both
  window(**plain);
  std::vector<double> ratios, times;
  for (int i = 0; i < pairs; ++i) {
    times.push_back(window(**fused));
    ratios.push_back(window(**plain) / times.back());
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(times.begin(), times.end());
  if (fused_seconds) *fused_seconds = times[times.size() / 2] / steps;
  return ratios[ratios.size() / 2];
}

// The same 784-512-512-10 SGD step written by hand on the same GEMM: the no-framework limit.
double hand_written_seconds_per_step(int64_t batch) {
  const int64_t in = 784, h = 512, out = 10;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (float& x : v) x = u(rng);
  };
  std::vector<float> x, w1, w2, w3, b1(h, 0), b2(h, 0), b3(out, 0);
  fill(x, batch * in);
  fill(w1, in * h);
  fill(w2, h * h);
  fill(w3, h * out);
  std::vector<int> y(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = int(rng() % out);
  std::vector<float> h1(batch * h), h2(batch * h), logits(batch * out), d3(batch * out),
      d2(batch * h), d1(batch * h), gw1(in * h), gw2(h * h), gw3(h * out);
  const float lr = 0.01f;
  auto step = [&] {
    using kernels::cpu::gemm;
    auto dense = [&](const float* a, const float* w, const float* bias, float* o, int64_t k,
                     int64_t n, bool relu) {
      gemm<float>(false, false, batch, n, k, a, w, o);
      for (int64_t r = 0; r < batch; ++r)
        for (int64_t c = 0; c < n; ++c) {
          float v = o[r * n + c] + bias[c];
          o[r * n + c] = relu && v < 0 ? 0 : v;
        }
    };
    dense(x.data(), w1.data(), b1.data(), h1.data(), in, h, true);
    dense(h1.data(), w2.data(), b2.data(), h2.data(), h, h, true);
    dense(h2.data(), w3.data(), b3.data(), logits.data(), h, out, false);
    for (int64_t r = 0; r < batch; ++r) {  // softmax cross-entropy gradient, mean over the batch
      float m = logits[r * out], sum = 0;
      for (int64_t c = 1; c < out; ++c) m = std::max(m, logits[r * out + c]);
      for (int64_t c = 0; c < out; ++c) sum += d3[r * out + c] = std::exp(logits[r * out + c] - m);
      for (int64_t c = 0; c < out; ++c)
        d3[r * out + c] = (d3[r * out + c] / sum - (c == y[r])) / batch;
    }
    auto backward = [&](const float* a, const float* d, float* w, float* gw, float* bias, int64_t k,
                        int64_t n) {
      gemm<float>(true, false, k, n, batch, a, d, gw);
      for (int64_t i = 0; i < k * n; ++i) w[i] -= lr * gw[i];
      for (int64_t c = 0; c < n; ++c) {
        float s = 0;
        for (int64_t r = 0; r < batch; ++r) s += d[r * n + c];
        bias[c] -= lr * s;
      }
    };
    gemm<float>(false, true, batch, h, out, d3.data(), w3.data(), d2.data());
    for (int64_t i = 0; i < batch * h; ++i) d2[i] *= h2[i] > 0;
    backward(h2.data(), d3.data(), w3.data(), gw3.data(), b3.data(), h, out);
    gemm<float>(false, true, batch, h, h, d2.data(), w2.data(), d1.data());
    for (int64_t i = 0; i < batch * h; ++i) d1[i] *= h1[i] > 0;
    backward(h1.data(), d2.data(), w2.data(), gw2.data(), b2.data(), h, h);
    backward(x.data(), d1.data(), w1.data(), gw1.data(), b1.data(), in, h);
  };
  return bench::median_seconds(step, quick ? 3 : 7, quick ? 0.1 : 0.4);
}

// Serves a parameter shard in a child process until killed (to members of `secret`'s job only,
// over sealed connections, when there is one); returns its port.
pid_t fork_server(uint16_t* port, std::shared_ptr<const actors::JobSecret> secret = nullptr) {
  int up[2];
  if (pipe(up) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(up[0]);
    actors::Runtime rt(actors::RuntimeOptions{.secret = secret});
    auto server = actors::Server::start(rt, {.port = 0});
    uint16_t p = server.ok() ? (*server)->port() : 0;
    if (write(up[1], &p, sizeof(p)) != sizeof(p)) _exit(1);
    pause();
    _exit(0);
  }
  close(up[1]);
  if (read(up[0], port, sizeof(*port)) != sizeof(*port)) *port = 0;
  close(up[0]);
  return pid;
}

// 4 MiB float tensors sent to a node placed on the server (Size: the reply is 8 bytes), with
// `parallel` independent nodes in flight. Returns GB/s of tensor payload.
double loopback_gbps(uint16_t port, int parallel,
                     std::shared_ptr<const actors::JobSecret> secret = nullptr) {
  actors::Runtime rt(actors::RuntimeOptions{.secret = secret});
  runtime::Graph g;
  runtime::GraphBuilder b(&g);
  Output x = ops::placeholder(b, DType::kFloat32, Shape{1 << 20}, "x");
  std::vector<Output> sizes;
  {
    auto ps = b.device("/job:ps/task:0");
    for (int i = 0; i < parallel; ++i) sizes.push_back(ops::size(b, x));
  }
  actors::SessionOptions options;
  options.cluster = {{"/job:ps/task:0", "127.0.0.1:" + std::to_string(port)}};
  auto s = actors::Session::create(rt, g, options);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
    return 0;
  }
  Tensor big(DType::kFloat32, Shape{1 << 20});
  const int64_t steps = quick ? 20 : 100;
  double per_step = loop_seconds_per_step(**s, steps, {{x, big}}, sizes, {});
  return parallel * double(big.byte_size()) / per_step / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("actors_bench", "bench_actors.json");
  std::string torch_dir, only;
  flags.value("torch-json", &torch_dir, "DIR", "where torch_peer wrote its figures (the peers)");
  flags.value("only", &only, "PART", "hop, tiny, mlp, cnn or loopback alone");
  flags.parse(argc, argv);
  quick = flags.quick;
  const std::string json = flags.json;
  uint16_t port = 0, sealed_port = 0;
  pid_t server = fork_server(&port);  // before any thread exists in this process
  // A job's members: every byte sealed (actors/net/seal.h).
  char secret_dir[] = "/tmp/actors_bench_XXXXXX";
  std::shared_ptr<const actors::JobSecret> secret;
  if (::mkdtemp(secret_dir) != nullptr &&
      actors::make_job_secret(std::string(secret_dir) + "/job.secret").ok()) {
    auto loaded = actors::load_job_secret(std::string(secret_dir) + "/job.secret");
    if (loaded.ok()) secret = *loaded;
    std::remove((std::string(secret_dir) + "/job.secret").c_str());
    ::rmdir(secret_dir);
  }
  pid_t sealed_server = secret ? fork_server(&sealed_port, secret) : -1;

  bench::Bars bars("actors");
  actors::RuntimeOptions tuned, defaults, caf_loop;
  defaults.caf_scheduler_defaults = true;
  caf_loop.caf_worker_loop = true;

  auto wanted = [&](const char* part) { return only.empty() || only == part; };
  if (wanted("hop")) {
    double hop = node_hop_us(tuned);
    double hop_defaults = node_hop_us(defaults);
    double hop_caf_loop = node_hop_us(caf_loop);
    double raw_hop = raw_caf_hop_us(tuned);
    double raw_hop_caf_loop = raw_caf_hop_us(caf_loop);
    bars.add("node_hop", hop, "us", "limit", 0.5, 0.5 / hop);
    bars.add("node_hop_vs_bare_caf", hop, "us", "bare_caf_chain", raw_hop, raw_hop / hop);
    std::printf("  node hop on CAF's scheduler defaults: %.3f us\n", hop_defaults);
    std::printf("  node hop / bare CAF chain with CAF's own worker loop: %.3f / %.3f us\n",
                hop_caf_loop, raw_hop_caf_loop);
  }
  if (wanted("tiny")) {
    double tiny = mlp_seconds_per_step(tuned, {10, 16, 3}, 8, 3000) * 1e6;
    double tiny_defaults = mlp_seconds_per_step(defaults, {10, 16, 3}, 8, 3000) * 1e6;
    double tiny_caf_loop = mlp_seconds_per_step(caf_loop, {10, 16, 3}, 8, 3000) * 1e6;
    Model tiny_model;
    build_mlp(tiny_model, {10, 16, 3}, 8);
    double tiny_fusion = fusion_speedup(tiny_model, 3000, quick ? 5 : 15);
    bars.add("tiny_mlp_step", tiny, "us", "limit", 15.0, 15.0 / tiny);
    double torch_tiny = torch_dir.empty() ? 0 : read_bar_value(torch_dir + "/torch_tiny.json");
    if (torch_tiny > 0) {
      bars.add("tiny_mlp_step_vs_libtorch", tiny, "us", "libtorch", torch_tiny, torch_tiny / tiny);
    } else {
      std::printf(
          "  libtorch peer for the tiny MLP: not run (install libtorch-dev; tools/dev bench)\n");
    }
    std::printf("  tiny MLP step on CAF's scheduler defaults: %.2f us\n", tiny_defaults);
    std::printf("  tiny MLP step with CAF's own worker loop: %.2f us\n", tiny_caf_loop);
    std::printf("  tiny MLP step without op fusion: %.2fx the fused step's time\n", tiny_fusion);
  }
  if (wanted("mlp")) {
    const int64_t batch = 128;
    double big_defaults =
        batch / mlp_seconds_per_step(defaults, {784, 512, 512, 10}, batch, quick ? 20 : 60);
    actors::RuntimeOptions two_workers;
    two_workers.worker_threads = 2;
    double big_two =
        batch / mlp_seconds_per_step(two_workers, {784, 512, 512, 10}, batch, quick ? 20 : 60);
    // Interleaved rounds against the hand-written loop: this host's speed drifts by tens of
    // percent between minutes, so the ratio is taken within each round and its median reported.
    std::vector<double> t_big, t_hand, ratios;
    for (int round = 0; round < (quick ? 3 : 5); ++round) {
      t_big.push_back(mlp_seconds_per_step(tuned, {784, 512, 512, 10}, batch, quick ? 20 : 60));
      t_hand.push_back(hand_written_seconds_per_step(batch));
      ratios.push_back(t_hand.back() / t_big.back());
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double big = batch / median(t_big);
    double hand = batch / median(t_hand);
    bars.add("mlp_throughput", big, "examples/s", "hand_written", hand, median(ratios));
    double torch_big = torch_dir.empty() ? 0 : read_bar_value(torch_dir + "/torch_big.json");
    if (torch_big > 0) {
      bars.add("mlp_throughput_vs_libtorch", big, "examples/s", "libtorch", torch_big,
               big / torch_big);
    } else {
      std::printf(
          "  libtorch peer for the big MLP: not run (install libtorch-dev; tools/dev bench)\n");
    }
    std::printf("  784-512-512-10 on CAF's scheduler defaults: %.0f examples/s (%.2f of tuned)\n",
                big_defaults, big_defaults / big);
    std::printf(
        "  784-512-512-10 with a second, parked CAF worker: %.0f examples/s (%.2f of tuned)\n",
        big_two, big_two / big);
    Model big_model;
    build_mlp(big_model, {784, 512, 512, 10}, batch);
    std::printf("  784-512-512-10 without op fusion: %.2fx the fused step's time\n",
                fusion_speedup(big_model, quick ? 20 : 40, quick ? 5 : 15));
  }
  if (wanted("cnn")) {
    Model cnn;
    build_cnn(cnn, 64);
    double train_s = 0, infer_s = 0;
    const double train_fusion = fusion_speedup(cnn, quick ? 3 : 5, quick ? 3 : 7, false, &train_s);
    const double infer_fusion = fusion_speedup(cnn, quick ? 3 : 5, quick ? 3 : 7, true, &infer_s);
    std::printf(
        "  2-conv CNN, batch 64: %.1f ms a training step, %.1f ms a forward pass; without op "
        "fusion %.2fx and %.2fx those times\n",
        train_s * 1e3, infer_s * 1e3, train_fusion, infer_fusion);
  }
  if (wanted("loopback") && server > 0 && port != 0) {
    double one = loopback_gbps(port, 1);
    double four = loopback_gbps(port, 4);
    bars.add("tensor_loopback", std::max(one, four), "GB/s", "limit", 2.5,
             std::max(one, four) / 2.5);
    std::printf(
        "  4 MiB tensors over loopback: %.2f GB/s one in flight, %.2f GB/s four in flight\n", one,
        four);
    if (sealed_server > 0 && sealed_port != 0) {
      // Interleaved with the plain runs' figures: the machine's noise hits both alike.
      const double sealed_one = loopback_gbps(sealed_port, 1, secret);
      const double sealed_four = loopback_gbps(sealed_port, 4, secret);
      const double sealed = std::max(sealed_one, sealed_four);
      bars.add("tensor_loopback_sealed", sealed, "GB/s", "unsealed", std::max(one, four),
               sealed / std::max(one, four));
      std::printf("  sealed (a job secret): %.2f GB/s one in flight, %.2f GB/s four in flight\n",
                  sealed_one, sealed_four);
    }
  } else if (wanted("loopback")) {
    std::printf("  tensor_loopback: the server process did not start; skipped\n");
  }
  for (pid_t child : {server, sealed_server}) {
    if (child <= 0) continue;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  if (!bars.write_json(json)) std::fprintf(stderr, "cannot write %s\n", json.c_str());
  return 0;
}
