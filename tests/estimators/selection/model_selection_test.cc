// Splits keep every row once and each class's share; cross-validation and searches score on
// held-out folds in parallel trials and pick the parameter known to be best.
#include "estimators/selection/model_selection.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

#include "estimators/canned/linear.h"
#include "estimators/canned/test_data.h"
#include "estimators/selection/trials.h"

using namespace troupe;
using namespace troupe::estimators;
using runtime::Shape;
using runtime::Tensor;

namespace {

Tensor iota_labels(int64_t n, int64_t classes) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % classes;
  return Tensor::from_vector(Shape{n}, v);
}

// Every row in exactly one test fold, never in its own fold's train rows.
void check_partition(const std::vector<Split>& splits, int64_t n) {
  std::multiset<int64_t> seen;
  for (const Split& s : splits) {
    CHECK(s.train.size() + s.test.size() == static_cast<size_t>(n));
    std::set<int64_t> train(s.train.begin(), s.train.end());
    for (int64_t r : s.test) CHECK(train.count(r) == 0);
    seen.insert(s.test.begin(), s.test.end());
  }
  CHECK(seen.size() == static_cast<size_t>(n));
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == static_cast<size_t>(n));
}

}  // namespace

TEST_CASE("train_test_split: sizes, no row twice, seeds, stratification, bad sizes") {
  std::vector<float> xs(100);
  for (int i = 0; i < 100; ++i) xs[i] = static_cast<float>(i);
  const Tensor x = Tensor::from_vector(Shape{100, 1}, xs);
  const Tensor y = iota_labels(100, 4);
  auto s = train_test_split(x, y, {.test_size = 0.25, .seed = 3});
  REQUIRE(s.ok());
  CHECK(s->x_test.dim(0) == 25);
  CHECK(s->x_train.dim(0) == 75);
  std::set<float> rows;
  for (const Tensor* t : {&s->x_train, &s->x_test}) {
    for (int64_t i = 0; i < t->dim(0); ++i) rows.insert(t->data<float>()[i]);
  }
  CHECK(rows.size() == 100);
  // Labels travel with their rows.
  for (int64_t i = 0; i < 25; ++i) {
    CHECK(s->y_test.data<int64_t>()[i] == static_cast<int64_t>(s->x_test.data<float>()[i]) % 4);
  }
  auto again = train_test_split(x, y, {.test_size = 0.25, .seed = 3});
  CHECK(std::vector<float>(again->x_test.data<float>(), again->x_test.data<float>() + 25) ==
        std::vector<float>(s->x_test.data<float>(), s->x_test.data<float>() + 25));
  auto other = train_test_split(x, y, {.test_size = 0.25, .seed = 4});
  CHECK(std::vector<float>(other->x_test.data<float>(), other->x_test.data<float>() + 25) !=
        std::vector<float>(s->x_test.data<float>(), s->x_test.data<float>() + 25));

  // 60 of class 0, 20 of class 1: stratified, the test part keeps 3 to 1.
  std::vector<int64_t> skewed(80);
  for (int i = 0; i < 80; ++i) skewed[i] = i < 60 ? 0 : 1;
  const Tensor sy = Tensor::from_vector(Shape{80}, skewed);
  auto strat =
      train_test_split(runtime::slice_rows(x, 0, 80), sy, {.test_size = 0.25, .stratify = true});
  REQUIRE(strat.ok());
  int ones = 0;
  for (int64_t i = 0; i < strat->y_test.dim(0); ++i) ones += strat->y_test.data<int64_t>()[i];
  CHECK(strat->y_test.dim(0) == 20);
  CHECK(ones == 5);

  CHECK(train_test_split(x, y, {.test_size = 0}).status().message().find("test_size") !=
        std::string::npos);
  CHECK(!train_test_split(x, y, {.test_size = 100}).ok());
  CHECK(train_test_split(x, runtime::slice_rows(y, 0, 50)).status().message() ==
        "100 examples but 50 labels");
}

TEST_CASE("KFold and StratifiedKFold: partitions, fold sizes, class shares, errors") {
  auto k = KFold(3).split(10);
  REQUIRE(k.ok());
  REQUIRE(k->size() == 3);
  CHECK((*k)[0].test == std::vector<int64_t>{0, 1, 2, 3});
  CHECK((*k)[1].test == std::vector<int64_t>{4, 5, 6});
  CHECK((*k)[2].test == std::vector<int64_t>{7, 8, 9});
  check_partition(*k, 10);
  auto shuffled = KFold(3, true, 7).split(10);
  REQUIRE(shuffled.ok());
  check_partition(*shuffled, 10);
  CHECK((*shuffled)[0].test != (*k)[0].test);
  CHECK(KFold(1).split(10).status().message().find("n_splits 1") != std::string::npos);
  CHECK(KFold(5).split(3).status().message().find("3 examples cannot make 5 folds") !=
        std::string::npos);

  const Tensor y = iota_labels(90, 3);
  auto s = StratifiedKFold(3, true, 1).split(y);
  REQUIRE(s.ok());
  check_partition(*s, 90);
  for (const Split& split : *s) {
    int per_class[3] = {0, 0, 0};
    for (int64_t r : split.test) ++per_class[y.data<int64_t>()[r]];
    CHECK(per_class[0] == 10);
    CHECK(per_class[1] == 10);
    CHECK(per_class[2] == 10);
  }
  CHECK(StratifiedKFold(4)
            .split(iota_labels(6, 2))
            .status()
            .message()
            .find("class 0 has 3 examples, fewer than n_splits 4") != std::string::npos);
}

TEST_CASE("run_trials runs trials at once as actors, at most as many as asked") {
  std::atomic<int> running{0}, most{0};
  auto trial = [&](size_t) {
    const int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Wait (a while at most) for a second trial to start beside this one.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (most.load() < 2 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    --running;
  };
  REQUIRE(run_trials(4, 2, trial).ok());
  CHECK(most.load() == 2);
  most = 0;
  std::atomic<int> calls{0};
  REQUIRE(run_trials(3, 1, [&](size_t) {
            ++calls;
            const int now = ++running;
            int seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            --running;
          }).ok());
  CHECK(most.load() == 1);
  CHECK(calls.load() == 3);
  const runtime::Status s = run_trials(3, 2, [](size_t i) {
    if (i == 1) throw std::runtime_error("boom");
  });
  CHECK(s.message() == "trial 1 threw: boom");
}

TEST_CASE("cross_val_score scores each held-out fold") {
  Tensor x, y;
  test::blobs(300, 2, 2, 1, &x, &y);
  LinearClassifier clf({}, test::quiet());
  auto scores = cross_val_score(clf, x, y, {.n_splits = 5});
  REQUIRE_MESSAGE(scores.ok(), scores.status().to_string());
  REQUIRE(scores->size() == 5);
  for (double s : *scores) CHECK(s > 0.95);
  // A fold that fails says which.
  Tensor bad_y = y.clone();
  for (int i = 7; i < 10; ++i) bad_y.data<int64_t>()[i] = 2;  // a class the model lacks
  auto failed = cross_val_score(clf, x, bad_y, {.n_splits = 3, .shuffle = false});
  CHECK(failed.status().message().find("fold ") == 0);
  CHECK(failed.status().message().find("label 2 of row") != std::string::npos);
}

TEST_CASE("GridSearchCV picks the known best params, tables them, refits, predicts") {
  Tensor x, y, tx, ty;
  test::blobs(300, 3, 2, 1, &x, &y);
  test::blobs(150, 3, 2, 2, &tx, &ty);
  LinearClassifier clf({.n_classes = 3}, test::quiet());
  // A huge L1 penalty keeps every weight at zero: chance accuracy. The search must see it.
  GridSearchCV search(clf, {{{"l1", {0.0, 1e4}}, {"learning_rate", {0.2, 0.5}}}},
                      {.cv = {.n_splits = 3}});
  REQUIRE(search.candidates().size() == 4);
  CHECK(std::get<double>(search.candidates()[0].at("l1")) == 0.0);
  CHECK(std::get<double>(search.candidates()[1].at("learning_rate")) == 0.5);
  REQUIRE(search.fit(x, y).ok());
  CHECK(std::get<double>(search.best_params().at("l1")) == 0.0);
  CHECK(search.best_score() > 0.95);
  const ResultsTable& t = search.cv_results();
  REQUIRE(t.rows().size() == 4);
  CHECK(t.columns().front() == "param_l1");
  CHECK(t.cell(search.best_index(), "rank_test_score") == "1");
  CHECK(t.cell(2, "param_l1") == "10000");
  CHECK(std::stod(t.cell(2, "mean_test_score")) < 0.5);
  CHECK(t.cell(0, "split2_test_score").size() > 0);
  CHECK(t.format().find("mean_test_score") != std::string::npos);
  const std::string csv =
      (std::filesystem::temp_directory_path() / ("troupe_cv_" + std::to_string(::getpid())))
          .string();
  REQUIRE(t.write_csv(csv).ok());
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  CHECK(header.rfind("param_l1,param_learning_rate,split0_test_score", 0) == 0);
  std::filesystem::remove(csv);
  REQUIRE(search.best_estimator() != nullptr);
  CHECK(*search.score(tx, ty) > 0.95);
  CHECK(search.predict(tx)->shape() == Shape{150});

  // A param the model lacks fails before any trial runs, naming it.
  GridSearchCV wrong(clf, {{{"depth", {int64_t{2}}}}});
  CHECK(wrong.fit(x, y).message().find("no parameter 'depth'") != std::string::npos);
  CHECK(GridSearchCV(clf, {}).fit(x, y).message().find("no candidates") != std::string::npos);
}

TEST_CASE("GridSearchCV::expand and RandomizedSearchCV::sample: order, bounds, seeds") {
  auto grid = GridSearchCV::expand(
      {{{"a", {int64_t{1}, int64_t{2}}}, {"b", {0.5, 1.5}}}, {{"c", {std::string("x")}}}});
  REQUIRE(grid.size() == 5);
  CHECK(std::get<int64_t>(grid[1].at("a")) == 1);
  CHECK(std::get<double>(grid[1].at("b")) == 1.5);
  CHECK(std::get<std::string>(grid[4].at("c")) == "x");

  const ParamDistributions d = {{"lr", ParamDistribution::log_uniform(1e-4, 1e-1)},
                                {"units", ParamDistribution::rand_int(8, 12)},
                                {"act", ParamDistribution::choice({"relu", "tanh"})},
                                {"drop", ParamDistribution::uniform(0.1, 0.2)}};
  auto a = RandomizedSearchCV::sample(d, 50, 1);
  auto b = RandomizedSearchCV::sample(d, 50, 1);
  REQUIRE(a.size() == 50);
  std::set<int64_t> units;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(to_text(a[i].at("lr")) == to_text(b[i].at("lr")));
    const double lr = std::get<double>(a[i].at("lr"));
    CHECK((lr >= 1e-4 && lr < 1e-1));
    units.insert(std::get<int64_t>(a[i].at("units")));
    const double drop = std::get<double>(a[i].at("drop"));
    CHECK((drop >= 0.1 && drop < 0.2));
  }
  CHECK(units == std::set<int64_t>{8, 9, 10, 11});
  CHECK(to_text(RandomizedSearchCV::sample(d, 1, 2)[0].at("lr")) != to_text(a[0].at("lr")));
  // Lists only: no candidate twice, and no more than the grid holds.
  const ParamDistributions lists = {{"a", ParamDistribution::choice({int64_t{1}, int64_t{2}})},
                                    {"b", ParamDistribution::choice({0.5, 1.5, 2.5})}};
  auto drawn = RandomizedSearchCV::sample(lists, 10, 3);
  REQUIRE(drawn.size() == 6);
  std::set<std::string> distinct;
  for (const ParamMap& p : drawn) distinct.insert(to_text(p.at("a")) + "/" + to_text(p.at("b")));
  CHECK(distinct.size() == 6);
  CHECK(RandomizedSearchCV::sample(lists, 4, 3).size() == 4);
}

TEST_CASE("RandomizedSearchCV searches a regressor by KFold") {
  Tensor x, y;
  test::line(300, {1.0f, -2.0f}, 0.5f, 0.05f, 3, &x, &y);
  LinearRegressor reg({.optimizer = ops::Optimizer::adam(0.05), .fit = {.batch_size = 32}},
                      test::quiet());
  RandomizedSearchCV search(reg, {{"l2", ParamDistribution::choice({0.0, 10.0})}}, 4, 5,
                            {.cv = {.n_splits = 3}});
  bool tries_zero = false;
  for (const ParamMap& c : search.candidates()) tries_zero |= std::get<double>(c.at("l2")) == 0;
  REQUIRE(tries_zero);
  REQUIRE(search.fit(x, y).ok());
  CHECK(std::get<double>(search.best_params().at("l2")) == 0.0);
  CHECK(search.best_score() > 0.98);
}
