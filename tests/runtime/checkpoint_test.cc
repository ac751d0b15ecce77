// Checkpoints: round trip, the index and keep_max, best-k, a damaged file refused by name with
// a fall back to the previous one, and SIGKILL at random moments never leaving a bad latest.
#include "runtime/checkpoint.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "harness/temp_dir.h"
#include "runtime/record_io.h"

using namespace troupe::runtime;

namespace {
std::string fresh_dir(const std::string& name) { return troupe::testing::temp_dir(name); }
void fill_store(VariableStore* s, int64_t step) {
  s->assign("dense/kernel", Tensor::from_vector<float>(Shape{2, 2}, {1.f * step, 2, 3, 4}));
  s->assign("global_step", Tensor::scalar<int64_t>(step));
  s->assign("vocab", Tensor::from_vector<std::string>(Shape{2}, {"a", std::to_string(step)}));
}
}  // namespace

TEST_CASE("checkpoint: round trip, index, keep_max") {
  const std::string dir = fresh_dir("basic");
  CheckpointManager m(dir, {.keep_max = 2});
  // Where the training input stands, asked at each save.
  m.set_input_position([](int64_t step) { return InputPosition{0xfeed, step / 10}; });
  VariableStore s;
  for (int64_t step : {100, 200, 300}) {
    fill_store(&s, step);
    auto path = m.save(step, s, {{"accuracy", step / 1000.0}});
    REQUIRE_MESSAGE(path.ok(), path.status().to_string());
    CHECK(*path == dir + "/model.ckpt-" + std::to_string(step));
  }
  CHECK(m.latest() == dir + "/model.ckpt-300");
  CHECK(m.all() == std::vector<std::string>{dir + "/model.ckpt-200", dir + "/model.ckpt-300"});
  CHECK(!std::filesystem::exists(dir + "/model.ckpt-100"));
  VariableStore back;
  auto r = m.restore_latest(&back);
  REQUIRE(r.ok());
  CHECK(r->global_step == 300);
  CHECK(r->input.fingerprint == 0xfeed);
  CHECK(r->input.batches == 30);
  CHECK(back.read("dense/kernel")->to_vector<float>() == std::vector<float>{300, 2, 3, 4});
  CHECK(back.read("vocab")->data<std::string>()[1] == "300");
  auto data = read_checkpoint(m.latest());
  REQUIRE(data.ok());
  CHECK(data->metrics.at("accuracy") == doctest::Approx(0.3));
  CHECK(CheckpointManager(fresh_dir("none")).restore_latest(&back).status().code() ==
        Code::kNotFound);
}

TEST_CASE("checkpoint: a damaged latest is refused by name and the previous one used") {
  const std::string dir = fresh_dir("damaged");
  CheckpointManager m(dir);
  VariableStore s;
  for (int64_t step : {1, 2}) {
    fill_store(&s, step);
    REQUIRE(m.save(step, s).ok());
  }
  std::string bytes;
  REQUIRE(read_file(m.latest(), &bytes).ok());
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(m.latest(), std::ios::binary | std::ios::trunc) << bytes;
  CHECK(read_checkpoint(m.latest()).status().code() == Code::kDataLoss);
  CHECK(read_checkpoint(m.latest()).status().message().find("model.ckpt-2") != std::string::npos);
  VariableStore back;
  auto r = m.restore_latest(&back);
  REQUIRE(r.ok());
  CHECK(r->global_step == 1);
  REQUIRE(r->refused.size() == 1);
  CHECK(r->refused[0].find("model.ckpt-2") != std::string::npos);

  std::ofstream(dir + "/model.ckpt-1", std::ios::binary | std::ios::trunc) << "garbage";
  auto none = m.restore_latest(&back);
  CHECK(none.status().code() == Code::kDataLoss);
  CHECK(none.status().message().find("bad magic") != std::string::npos);
}

TEST_CASE("checkpoint: keeps the best k by a metric") {
  const std::string dir = fresh_dir("best");
  CheckpointManager m(dir,
                      {.keep_max = 1, .best_k = 2, .metric = "loss", .higher_is_better = false});
  VariableStore s;
  const double losses[] = {0.9, 0.5, 0.7, 0.4, 0.8};
  for (int step = 1; step <= 5; ++step) {
    fill_store(&s, step);
    REQUIRE(m.save(step, s, {{"loss", losses[step - 1]}}).ok());
  }
  CHECK(m.best() ==
        std::vector<std::string>{dir + "/best/model.ckpt-4", dir + "/best/model.ckpt-2"});
  CHECK(std::filesystem::exists(dir + "/best/model.ckpt-2"));
  CHECK(!std::filesystem::exists(dir + "/best/model.ckpt-3"));
  CHECK(read_checkpoint(m.best()[0])->global_step == 4);
}

TEST_CASE("checkpoint: SIGKILL at any moment leaves a whole latest checkpoint") {
  const std::string dir = fresh_dir("kill");
  std::mt19937 rng(5);
  int64_t last_seen = 0;
  for (int round = 0; round < 8; ++round) {
    int saved[2];
    REQUIRE(::pipe(saved) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(saved[0]);
      CheckpointManager m(dir, {.keep_max = 3});
      VariableStore s;
      VariableStore prev;
      int64_t step = m.restore_latest(&prev).ok() ? read_checkpoint(m.latest())->global_step : 0;
      // Big enough that a kill often lands inside a write.
      std::vector<float> big(1 << 18);
      for (;;) {
        ++step;
        std::fill(big.begin(), big.end(), static_cast<float>(step));
        s.assign("big", Tensor::from_vector(Shape{static_cast<int64_t>(big.size())}, big));
        s.assign("global_step", Tensor::scalar<int64_t>(step));
        if (!m.save(step, s).ok()) ::_exit(3);
        if (saved[1] >= 0) {  // the first save is done: the parent may start its clock
          if (::write(saved[1], "s", 1) != 1) ::_exit(4);
          ::close(saved[1]);
          saved[1] = -1;
        }
      }
    }
    // However slow a loaded machine makes the child, it has saved once before the kill; the
    // kill then lands at a random moment of the saves that follow.
    ::close(saved[1]);
    char c;
    REQUIRE(::read(saved[0], &c, 1) == 1);
    ::close(saved[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 60));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CheckpointManager m(dir);
    VariableStore s;
    auto r = m.restore_latest(&s);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK(r->refused.empty());
    CHECK(r->global_step >= last_seen);
    last_seen = r->global_step;
    auto big = s.read("big");
    REQUIRE(big.ok());
    CHECK(big->data<float>()[0] == static_cast<float>(r->global_step));
    CHECK(big->data<float>()[big->num_elements() - 1] == static_cast<float>(r->global_step));
  }
  CHECK(last_seen > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoint: a restore that does not fit the graph is refused by name, store untouched") {
  const std::string dir = fresh_dir("fit");
  CheckpointManager m(dir);
  VariableStore s;
  fill_store(&s, 7);
  s.assign("dense/kernel/Adam_m", Tensor::from_vector<float>(Shape{2, 2}, {0, 0, 0, 0}));
  s.assign("dense/kernel/Adam_t", Tensor::scalar<float>(3));
  REQUIRE(m.save(7, s).ok());
  auto data = read_checkpoint(m.latest());
  REQUIRE(data.ok());
  const VariableSpec kernel{"dense/kernel", DType::kFloat32, Shape{2, 2}};
  const VariableSpec step{"global_step", DType::kInt64, Shape{}};
  CHECK(check_restore(*data, {kernel, step}, false).ok());

  struct Case {
    std::vector<VariableSpec> graph;
    bool partial;
    const char* names;
  };
  const Case refused[] = {
      {{kernel, step, {"dense/bias", DType::kFloat32, Shape{2}}}, false, "'dense/bias'"},
      {{{"dense/kernel", DType::kFloat64, Shape{2, 2}}}, false, "'dense/kernel' is float32[2,2]"},
      {{{"dense/kernel", DType::kFloat32, Shape{2, 3}}}, true, "float32[2,3] in the graph"},
  };
  for (const Case& c : refused) {
    Status st = check_restore(*data, c.graph, c.partial);
    CHECK(st.code() == Code::kFailedPrecondition);
    CHECK_MESSAGE(st.message().find(c.names) != std::string::npos, st.message());
  }
  // A warm start: the bias the checkpoint lacks keeps its initial value.
  CHECK(check_restore(*data, {kernel, {"dense/bias", DType::kFloat32, Shape{2}}}, true).ok());

  // A slot of another shape than its variable's (a checkpoint of another model's optimizer).
  s.assign("dense/kernel/Adam_v", Tensor::from_vector<float>(Shape{3}, {0, 0, 0}));
  REQUIRE(m.save(8, s).ok());
  VariableStore target;
  target.assign("dense/kernel", Tensor::from_vector<float>(Shape{2, 2}, {9, 9, 9, 9}));
  auto r = m.restore_latest(&target, [&](const CheckpointData& d) {
    return check_restore(d, {kernel, step}, false);
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("slot 'dense/kernel/Adam_v'") != std::string::npos);
  CHECK(r.status().message().find("model.ckpt-8") != std::string::npos);
  CHECK(target.names() == std::vector<std::string>{"dense/kernel"});
  CHECK(target.read("dense/kernel")->to_vector<float>() == std::vector<float>{9, 9, 9, 9});
}

TEST_CASE("checkpoint: names in an index never reach outside the model directory") {
  const std::string dir = fresh_dir("escape");
  const std::string victim = fresh_dir("escape-victim");
  std::filesystem::create_directories(victim);
  const std::string outside = victim + "/precious";
  { std::ofstream(outside) << "keep me"; }
  CheckpointManager m(dir, {.keep_max = 1});
  VariableStore s;
  fill_store(&s, 1);
  REQUIRE(m.save(1, s).ok());
  {
    std::ofstream index(dir + "/checkpoint");
    index << "model_checkpoint_path: \"model.ckpt-1\"\n"
          << "all_model_checkpoint_paths: \"../escape-victim/precious\"\n"
          << "all_model_checkpoint_paths: \"" << outside << "\"\n"
          << "all_model_checkpoint_paths: \"model.ckpt-1\"\n";
  }
  CHECK(m.all() == std::vector<std::string>{dir + "/model.ckpt-1"});
  fill_store(&s, 2);
  REQUIRE(m.save(2, s).ok());  // keep_max 1: expires what the index lists before
  CHECK(std::filesystem::exists(outside));
  CHECK(m.all() == std::vector<std::string>{dir + "/model.ckpt-2"});
  CHECK_FALSE(is_plain_file_name(".."));
  CHECK_FALSE(is_plain_file_name("a/b"));
  CHECK(is_plain_file_name("model.ckpt-2"));
}

TEST_CASE("checkpoint: a best-k save of a step already listed keeps its file") {
  const std::string dir = fresh_dir("best-again");
  CheckpointManager m(dir, {.keep_max = 0, .best_k = 1, .metric = "accuracy"});
  VariableStore s;
  fill_store(&s, 5);
  REQUIRE(m.save(5, s, {{"accuracy", 0.5}}).ok());
  // The same step saved again with a better value, as a resumed run may: its old entry, now
  // second, must not delete the file the new one keeps.
  REQUIRE(m.save(5, s, {{"accuracy", 0.9}}).ok());
  REQUIRE(m.best().size() == 1);
  CHECK(std::filesystem::exists(m.best()[0]));
  CHECK(read_checkpoint(m.best()[0]).ok());
}

namespace {
// A 7x2 float matrix whose row r holds {r, 10 + r}, or rows [first, first + n) of it.
Tensor rows_of(int64_t first, int64_t n, float plus = 0) {
  std::vector<float> v;
  for (int64_t r = first; r < first + n; ++r) {
    v.push_back(static_cast<float>(r) + plus);
    v.push_back(static_cast<float>(10 + r) + plus);
  }
  return Tensor::from_vector<float>(Shape{n, 2}, v);
}

// A checkpoint of "w" (7x2) in `blocks` parts of those rows, each with an Adam-like slot "m"
// (the rows plus 100) and a scalar slot "t", and an unpartitioned "b".
CheckpointData saved_in(const std::vector<int64_t>& blocks) {
  CheckpointData d;
  d.global_step = 9;
  d.tensors["b"] = Tensor::from_vector<float>(Shape{2}, {1, 2});
  int64_t first = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string name = blocks.size() == 1 ? std::string("w") : "w/part_" + std::to_string(i);
    d.tensors[name] = rows_of(first, blocks[i]);
    d.tensors[name + "/m"] = rows_of(first, blocks[i], 100);
    d.tensors[name + "/t"] = Tensor::scalar<float>(0.5f);
    first += blocks[i];
  }
  return d;
}

// The graph's variables: "w" in `blocks` parts (one: whole), and "b".
std::vector<VariableSpec> graph_in(const std::vector<int64_t>& blocks) {
  std::vector<VariableSpec> specs = {{"b", DType::kFloat32, Shape{2}}};
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string name = blocks.size() == 1 ? std::string("w") : "w/part_" + std::to_string(i);
    specs.push_back({name, DType::kFloat32, Shape{blocks[i], 2}});
  }
  return specs;
}
}  // namespace

TEST_CASE("checkpoint: partitioned variables restore into any number of parts, slots with them") {
  const std::vector<std::vector<int64_t>> layouts = {{7}, {4, 3}, {3, 2, 2}, {2, 2, 2, 1}};
  for (const auto& saved : layouts) {
    for (const auto& wanted : layouts) {
      CAPTURE(saved.size());
      CAPTURE(wanted.size());
      CheckpointData d = saved_in(saved);
      const std::vector<VariableSpec> graph = graph_in(wanted);
      REQUIRE(fit_partitions(&d, graph).ok());
      REQUIRE(check_restore(d, graph, false).ok());
      // Exactly the graph's parts and their slots are left, with the right rows.
      std::set<std::string> names;
      for (const auto& [name, t] : d.tensors) names.insert(name);
      std::set<std::string> want = {"b"};
      int64_t first = 0;
      for (const VariableSpec& v : graph) {
        if (v.name == "b") continue;
        want.insert({v.name, v.name + "/m", v.name + "/t"});
        const int64_t n = v.shape.dim(0);
        CHECK(d.tensors.at(v.name).to_vector<float>() == rows_of(first, n).to_vector<float>());
        CHECK(d.tensors.at(v.name + "/m").to_vector<float>() ==
              rows_of(first, n, 100).to_vector<float>());
        CHECK(d.tensors.at(v.name + "/t").to_vector<float>() == std::vector<float>{0.5f});
        first += n;
      }
      CHECK(names == want);
      CHECK(d.tensors.at("b").to_vector<float>() == std::vector<float>{1, 2});
    }
  }
}

TEST_CASE("checkpoint: a partitioned variable with other rows than the graph's is named") {
  CheckpointData d = saved_in({4, 3});
  const std::vector<VariableSpec> graph = {{"w/part_0", DType::kFloat32, Shape{4, 2}},
                                           {"w/part_1", DType::kFloat32, Shape{4, 2}}};
  const Status st = fit_partitions(&d, graph);
  CHECK(st.code() == Code::kFailedPrecondition);
  CHECK_MESSAGE(
      st.message().find("variable 'w' has 7 rows in the checkpoint but 8") != std::string::npos,
      st.message());
  // A variable the checkpoint lacks altogether is left for check_restore to name.
  CheckpointData other = saved_in({7});
  REQUIRE(fit_partitions(&other, {{"v/part_0", DType::kFloat32, Shape{4, 2}},
                                  {"v/part_1", DType::kFloat32, Shape{3, 2}}})
              .ok());
  CHECK(other.tensors.count("w"));
  CHECK(check_restore(other, {{"v/part_0", DType::kFloat32, Shape{4, 2}}}, false).code() ==
        Code::kFailedPrecondition);
}
