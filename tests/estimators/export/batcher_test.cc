// The batching actor: requests answered in batches get exactly what they get alone, batches form
// by size and by timeout, and destroying the batcher answers everything submitted.
#include "estimators/export/batcher.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "ops/array_ops.h"
#include "ops/math_ops.h"
#include "ops/nn_ops.h"

using namespace troupe;
using runtime::Shape;
using runtime::Tensor;
namespace fs = std::filesystem;

namespace {

// x [-1, 16] -> softmax(x W + b), W and b constants: each row's answer depends on that row only.
std::string small_export(const std::string& base) {
  serving::SavedModel m;
  runtime::GraphBuilder b(&m.graph);
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> w(16 * 10), bias(10);
  for (float& v : w) v = g(rng);
  for (float& v : bias) v = g(rng);
  auto x = ops::placeholder(b, runtime::DType::kFloat32, Shape{-1, 16}, "x");
  auto logits =
      ops::add(b, ops::matmul(b, x, ops::constant(b, Tensor::from_vector(Shape{16, 10}, w))),
               ops::constant(b, Tensor::from_vector(Shape{10}, bias)));
  m.signatures["serving_default"] =
      serving::make_signature(m.graph, "predict", {{"x", x}},
                              {{"probabilities", ops::softmax(b, logits)}, {"logits", logits}});
  auto dir = serving::write_saved_model(base, m);
  REQUIRE_MESSAGE(dir.ok(), dir.status().to_string());
  return *dir;
}

Tensor rows_of(int64_t n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(n * 16);
  for (float& f : v) f = u(rng);
  return Tensor::from_vector(Shape{n, 16}, v);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<runtime::Result<serving::NamedTensors>> got;
  int pending = 0;
  serving::PredictDone slot(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    ++pending;
    return [this, i](runtime::Result<serving::NamedTensors> r) {
      std::lock_guard<std::mutex> lock(mu);
      got[i] = std::move(r);
      if (--pending == 0) cv.notify_all();
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return pending == 0; });
  }
};

}  // namespace

TEST_CASE("batched requests get what each gets alone, bit for bit") {
  const std::string base =
      (fs::temp_directory_path() / ("troupe_batcher_" + std::to_string(::getpid()))).string();
  fs::remove_all(base);
  const std::string dir = small_export(base);
  actors::Runtime rt;
  auto p = serving::load(dir, {.sessions = 3, .batch_invariant = true, .runtime = &rt});
  REQUIRE(p.ok());
  std::shared_ptr<serving::Predictor> predictor = std::move(*p);
  const int n = 60;
  std::vector<Tensor> inputs;
  std::vector<serving::NamedTensors> alone;
  for (int i = 0; i < n; ++i) {
    inputs.push_back(rows_of(1 + i % 3, i));
    auto out = predictor->predict({{"x", inputs.back()}});
    REQUIRE(out.ok());
    alone.push_back(*out);
  }
  struct Mode {
    bool enabled, adaptive;
  };
  for (Mode mode : {Mode{true, false}, Mode{true, true}, Mode{false, false}}) {
    CAPTURE(mode.enabled);
    CAPTURE(mode.adaptive);
    Answers a;
    a.got.assign(n, runtime::internal_error("no answer"));
    int64_t batches = 0;
    {
      serving::Batcher batcher(rt, predictor,
                               {.enabled = mode.enabled,
                                .max_batch_size = 8,
                                .batch_timeout = std::chrono::milliseconds(20),
                                .num_batch_threads = 2,
                                .adaptive = mode.adaptive});
      // Adaptive, one caller alone runs each request itself (nothing else is in flight); four
      // callers at once keep the runners busy, and requests queue and batch behind them.
      const int callers = mode.adaptive ? 4 : 1;
      std::vector<std::thread> threads;
      for (int c = 0; c < callers; ++c) {
        threads.emplace_back([&, c] {
          for (int i = c; i < n; i += callers) {
            batcher.submit("serving_default", {{"x", inputs[i]}}, a.slot(i));
          }
        });
      }
      for (std::thread& t : threads) t.join();
      a.wait();
      batches = batcher.stats().batches;
      CHECK(batcher.stats().requests == n);
    }
    for (int i = 0; i < n; ++i) {
      REQUIRE_MESSAGE(a.got[i].ok(), a.got[i].status().to_string());
      CHECK(same_bits(a.got[i]->at("probabilities"), alone[i].at("probabilities")));
      CHECK(same_bits(a.got[i]->at("logits"), alone[i].at("logits")));
    }
    if (mode.enabled && !mode.adaptive) {
      CHECK(batches < n / 2);  // 120 rows in batches of at most 8 rows
      CHECK(batches >= 120 / 8);
    } else if (mode.enabled) {
      // Some requests leave at once, the rest queue behind the busy runners and batch.
      CHECK(batches < n);
      CHECK(batches >= 120 / 8);
    } else {
      CHECK(batches == n);
    }
  }
  fs::remove_all(base);
}

TEST_CASE("adaptive batching: a lone request leaves at once, not after the timeout") {
  const std::string base =
      (fs::temp_directory_path() / ("troupe_batcher3_" + std::to_string(::getpid()))).string();
  fs::remove_all(base);
  const std::string dir = small_export(base);
  actors::Runtime rt;
  auto loaded = serving::load(dir, {.batch_invariant = true, .runtime = &rt});
  REQUIRE(loaded.ok());
  Answers a;
  a.got.assign(1, runtime::internal_error("no answer"));
  serving::Batcher batcher(
      rt, std::move(*loaded),
      {.max_batch_size = 1000, .batch_timeout = std::chrono::seconds(60), .num_batch_threads = 1});
  const auto start = std::chrono::steady_clock::now();
  batcher.submit("serving_default", {{"x", rows_of(2, 1)}}, a.slot(0));
  a.wait();
  REQUIRE(a.got[0].ok());
  // Not the minute a batch of 1000 rows would wait for.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  CHECK(batcher.stats().batches == 1);
  fs::remove_all(base);
}

TEST_CASE("a lone request leaves after the timeout; bad ones are refused; the end answers all") {
  const std::string base =
      (fs::temp_directory_path() / ("troupe_batcher2_" + std::to_string(::getpid()))).string();
  fs::remove_all(base);
  const std::string dir = small_export(base);
  actors::Runtime rt;
  auto loaded = serving::load(dir, {.batch_invariant = true, .runtime = &rt});
  REQUIRE(loaded.ok());
  std::shared_ptr<serving::Predictor> predictor = std::move(*loaded);
  Answers a;
  a.got.assign(3, runtime::internal_error("no answer"));
  {
    serving::Batcher batcher(rt, predictor,
                             {.max_batch_size = 1000,
                              .batch_timeout = std::chrono::milliseconds(30),
                              .num_batch_threads = 1,
                              .adaptive = false});
    const auto start = std::chrono::steady_clock::now();
    batcher.submit("serving_default", {{"x", rows_of(2, 1)}}, a.slot(0));
    a.wait();
    const auto waited = std::chrono::steady_clock::now() - start;
    REQUIRE(a.got[0].ok());
    CHECK(waited >= std::chrono::milliseconds(30));
    batcher.submit("serving_default", {{"x", Tensor(runtime::DType::kFloat32, Shape{2, 15})}},
                   a.slot(1));
    a.wait();
    CHECK(a.got[1].status().code() == runtime::Code::kInvalidArgument);
    // Waiting for a batch of 1000 rows (for 30 ms) when the batcher goes: answered anyway.
    batcher.submit("serving_default", {{"x", rows_of(1, 2)}}, a.slot(2));
  }
  a.wait();
  CHECK(a.got[2].ok());
  fs::remove_all(base);
}
