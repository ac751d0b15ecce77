// What the Estimator's actors cost a training step (DESIGN.md §3: hooks as actors must not add a
// round trip per step). A linear model with batches of 32 keeps each step short, so that the
// overhead shows:
//   hook_cost_per_step   extra microseconds per step for each cheap per-step hook (an actor
//                        that fetches the loss every step), against a blocking request round
//                        trip from a user thread into the actor system, what a hook that
//                        answered synchronously would cost at least; ratio: round trip / hook
//   estimator_vs_session training steps per second through Estimator::train (EstimatorActor,
//                        input pipeline, the default hooks) against the same graph run by a
//                        plain session loop fed from memory
//   pipeline_vs_session  the plain loop with its batches from an input pipeline (queue and
//                        runner actors, as the Estimator reads them) against the same loop fed
//                        from memory: the input's share of the Estimator's cost
//
//   estimator_bench [--quick] [--json FILE]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "troupe/troupe.h"

using namespace troupe;
using namespace troupe::estimators;
using namespace troupe::runtime;

namespace {

bool quick = false;
constexpr int64_t kBatch = 32, kRows = 32 * 500;

runtime::Result<EstimatorSpec> linear_model(const ModelInputs& in) {
  runtime::GraphBuilder& b = in.b;
  Output w = ops::variable(b, "w", Shape{4, 1}, DType::kFloat32,
                           ops::zeros(b, Shape{4, 1}, DType::kFloat32));
  Output pred = ops::reshape(b, ops::matmul(b, in.features.at("x"), w), {-1});
  EstimatorSpec spec;
  spec.predictions["y"] = pred;
  if (in.mode == Mode::kPredict) return spec;
  spec.loss = ops::reduce_mean(b, ops::square(b, ops::sub(b, pred, in.labels)));
  if (in.mode == Mode::kTrain)
    spec.train_op = ops::minimize(b, spec.loss, ops::Optimizer::sgd(0.01));
  return spec;
}

void data(Tensor* x, Tensor* y) {
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> xs(kRows * 4), ys(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int k = 0; k < 4; ++k) xs[i * 4 + k] = g(rng);
    ys[i] = xs[i * 4] - 2 * xs[i * 4 + 1];
  }
  *x = Tensor::from_vector(Shape{kRows, 4}, xs);
  *y = Tensor::from_vector(Shape{kRows}, ys);
}

// Fetches the loss every step and does next to nothing with it.
class CheapHook : public SessionRunHook {
 public:
  runtime::Status begin(HookSetup& s) override {
    loss_ = s.fetch(s.loss());
    return runtime::ok_status();
  }
  runtime::Status after_run(StepContext& c) override {
    sum_ += c.value(loss_).scalar_as_double();
    return runtime::ok_status();
  }

 private:
  int loss_ = -1;
  double sum_ = 0;
};

// Seconds per step of one epoch through Estimator::train with `hooks` cheap hooks.
double estimator_step_seconds(const Tensor& x, const Tensor& y, int hooks) {
  RunConfig config;
  config.log_step_count_steps = 1 << 30;
  Estimator est(linear_model, config);
  auto d = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = kBatch, .num_epochs = 1});
  TrainOptions o;
  for (int i = 0; i < hooks; ++i) o.hooks.push_back(std::make_shared<CheapHook>());
  auto once = [&] {
    auto r = est.train(*d, o);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().to_string().c_str());
      std::exit(1);
    }
  };
  return bench::median_seconds(once, quick ? 3 : 7, quick ? 0.1 : 0.3) / (kRows / kBatch);
}

// linear_model in a plain session of its own, initialized, fed through placeholders.
struct PlainModel {
  actors::Runtime rt;
  runtime::Graph g;
  Output px, py;
  EstimatorSpec spec;
  std::unique_ptr<actors::Session> session;

  PlainModel() {
    runtime::GraphBuilder b(&g);
    ops::global_step(b);
    px = ops::placeholder(b, DType::kFloat32, Shape{-1, 4}, "x");
    py = ops::placeholder(b, DType::kFloat32, Shape{-1}, "y");
    const Params params;
    const RunConfig config;
    ModelInputs in{b, {{"x", px}}, py, Mode::kTrain, params, config};
    auto built = linear_model(in);
    int init = ops::global_variables_initializer(b);
    auto s = actors::Session::create(rt, g);
    if (!built.ok() || !b.ok() || !s.ok() || !(*s)->run({}, {}, {init}).ok()) {
      std::fprintf(stderr, "error: cannot build the session\n");
      std::exit(1);
    }
    spec = std::move(*built);
    session = std::move(*s);
  }
};

// Seconds per step of the same graph in a plain session loop, batches from memory.
double session_step_seconds(const Tensor& x, const Tensor& y) {
  PlainModel m;
  std::vector<runtime::FeedList> batches;
  for (int64_t i = 0; i < kRows / kBatch; ++i) {
    auto rows = [&](const Tensor& t) {
      Tensor part(t.dtype(), t.rank() == 2 ? Shape{kBatch, 4} : Shape{kBatch});
      const int64_t n = part.num_elements();
      std::memcpy(part.data<float>(), t.data<float>() + i * n, n * sizeof(float));
      return part;
    };
    batches.push_back({{m.px, rows(x)}, {m.py, rows(y)}});
  }
  auto once = [&] {
    actors::LoopRequest loop;
    loop.steps = static_cast<int64_t>(batches.size());
    loop.fetches = {m.spec.loss};
    loop.targets = {m.spec.train_op};
    loop.feed = [&](int64_t i, runtime::FeedList* f) {
      *f = batches[static_cast<size_t>(i)];
      return runtime::ok_status();
    };
    (void)m.session->run_loop(std::move(loop));
  };
  return bench::median_seconds(once, quick ? 3 : 7, quick ? 0.1 : 0.3) / batches.size();
}

// Seconds per step of the plain loop reading each epoch through an input pipeline.
double pipeline_step_seconds(const Tensor& x, const Tensor& y) {
  PlainModel m;
  auto d = input::arrays({{"x", x}, {"y", y}}, "y", {.batch_size = kBatch, .num_epochs = 1});
  auto once = [&] {
    auto p = input::Pipeline::start(m.rt, *d);
    if (!p.ok()) std::exit(1);
    actors::LoopRequest loop;
    loop.steps = INT64_MAX;
    loop.fetches = {m.spec.loss};
    loop.targets = {m.spec.train_op};
    (*p)->attach(&loop, {m.px, m.py});
    (void)m.session->run_loop(std::move(loop));
  };
  return bench::median_seconds(once, quick ? 3 : 7, quick ? 0.1 : 0.3) / (kRows / kBatch);
}

// A request from a blocking user thread to an actor and its answer.
double round_trip_seconds() {
  actors::Runtime rt;
  auto echo = rt.system().spawn([]() -> caf::behavior { return {[](int v) { return v; }}; });
  caf::scoped_actor self{rt.system()};
  auto once = [&] {
    for (int i = 0; i < 100; ++i)
      self->request(echo, caf::infinite, i).receive([](int) {}, [](caf::error&) {});
  };
  const double s = bench::median_seconds(once, quick ? 3 : 7, quick ? 0.05 : 0.2) / 100;
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags("estimator_bench", "bench_estimator.json");
  flags.parse(argc, argv);
  quick = flags.quick;
  const std::string json = flags.json;
  Tensor x, y;
  data(&x, &y);
  bench::Bars bars("estimator");
  constexpr int kHooks = 8;
  // Interleaved, medians: this host drifts between seconds.
  std::vector<double> none, many, plain, piped;
  for (int r = 0; r < 3; ++r) {
    none.push_back(estimator_step_seconds(x, y, 0));
    many.push_back(estimator_step_seconds(x, y, kHooks));
    plain.push_back(session_step_seconds(x, y));
    piped.push_back(pipeline_step_seconds(x, y));
  }
  for (auto* v : {&none, &many, &plain, &piped}) std::sort(v->begin(), v->end());
  const double per_hook_us = std::max(0.0, (many[1] - none[1]) / kHooks * 1e6);
  const double trip_us = round_trip_seconds() * 1e6;
  bars.add("hook_cost_per_step", per_hook_us, "us", "request_round_trip", trip_us,
           per_hook_us > 0 ? trip_us / per_hook_us : 0);
  bars.add("estimator_vs_session", 1 / none[1], "steps/s", "session_loop", 1 / plain[1],
           plain[1] / none[1]);
  bars.add("pipeline_vs_session", 1 / piped[1], "steps/s", "session_loop", 1 / plain[1],
           plain[1] / piped[1]);
  std::printf(
      "  step: %.1f us plain session, %.1f us through a pipeline, %.1f us Estimator, %.1f us "
      "with %d more hooks\n",
      plain[1] * 1e6, piped[1] * 1e6, none[1] * 1e6, many[1] * 1e6, kHooks);
  if (!bars.write_json(json)) std::fprintf(stderr, "cannot write %s\n", json.c_str());
  return 0;
}
