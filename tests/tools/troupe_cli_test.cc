// The troupe command line as a user runs it: train, evaluate and predict on a CSV, one JSON line
// of metrics, and bad flags or data as one line on stderr with a non-zero exit.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

// Runs a shell command line; stdout and stderr of the whole line are captured.
Run shell(const std::string& line) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string out = dir + "/troupe_cli_out_" + std::to_string(::getpid());
  const std::string err = dir + "/troupe_cli_err_" + std::to_string(::getpid());
  const std::string cmd = "(" + line + ") >" + out + " 2>" + err;
  Run r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream o(out), e(err);
  r.out.assign(std::istreambuf_iterator<char>(o), {});
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

Run troupe(const std::string& args) { return shell(std::string(TROUPE_CLI) + " " + args); }

// An empty directory of this process's for one test's files.
std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("troupe_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

size_t lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("troupe train / evaluate / predict on CSV files") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::mt19937 rng(1);
  std::normal_distribution<double> g(0, 1);
  for (const char* name : {"train.csv", "test.csv"}) {
    std::ofstream f(dir / name);
    f << "a,b,label\n";
    for (int i = 0; i < 400; ++i) {
      const int y = i % 3;
      f << g(rng) + 3 * y << "," << g(rng) - 2 * y << "," << y << "\n";
    }
  }
  const std::string model = (dir / "model").string();
  const std::string data = "--data csv:" + (dir / "train.csv").string() + " --label label";
  Run t = troupe("train --model dnn " + data + " --eval-data csv:" + (dir / "test.csv").string() +
                 " --model-dir " + model +
                 " --hidden 16 --epochs 20 --batch-size 32 --learning-rate 0.01 --seed 1"
                 " --export latest");
  REQUIRE_MESSAGE(t.status == 0, t.err);
  CHECK(lines(t.out) == 1);
  CHECK(t.out.rfind("{\"accuracy\": ", 0) == 0);
  const double accuracy = std::stod(t.out.substr(13));
  CHECK(accuracy > 0.9);
  CHECK(t.out.find("\"global_step\": 250") != std::string::npos);
  // --export latest: the model for serving, in model_dir/export/latest/<seconds>.
  int exports = 0;
  for (auto& e : std::filesystem::directory_iterator(model + "/export/latest")) {
    ++exports;
    for (const char* f : {"graph.capnp", "variables/variables.ckpt", "saved_model.json"}) {
      CHECK(std::filesystem::exists(e.path() / f));
    }
  }
  CHECK(exports == 1);

  Run other = troupe("train --model dnn " + data + " --model-dir " + model + " --hidden 32");
  CHECK(other.status == 2);
  CHECK(other.err.find("holds a model with hidden_units 16, not 32") != std::string::npos);

  Run e = troupe("evaluate --model-dir " + model + " --data csv:" + (dir / "test.csv").string() +
                 " --label label");
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.out == t.out);

  const std::string preds = (dir / "p.csv").string();
  Run p = troupe("predict --model-dir " + model + " --data csv:" + (dir / "test.csv").string() +
                 " --output " + preds);
  REQUIRE_MESSAGE(p.status == 0, p.err);
  std::ifstream pf(preds);
  std::string header;
  std::getline(pf, header);
  CHECK(header == "class,p0,p1,p2");
  size_t n = 0;
  for (std::string line; std::getline(pf, line);) ++n;
  CHECK(n == 400);

  // troupe export, then troupe predict on the export: the same predictions as the model_dir's.
  Run x = troupe("export --model-dir " + model + " --out " + (dir / "serving").string());
  REQUIRE_MESSAGE(x.status == 0, x.err);
  const std::string version = x.out.substr(0, x.out.find('\n'));
  CHECK(std::filesystem::exists(version + "/saved_model.json"));
  CHECK(std::filesystem::path(version).parent_path() == dir / "serving");
  const std::string served = (dir / "p_export.csv").string();
  Run pe = troupe("predict --export " + version + " --data csv:" + (dir / "test.csv").string() +
                  " --output " + served);
  REQUIRE_MESSAGE(pe.status == 0, pe.err);
  std::ifstream a(preds), b(served);
  const std::string from_model((std::istreambuf_iterator<char>(a)), {});
  const std::string from_export((std::istreambuf_iterator<char>(b)), {});
  CHECK(from_model.size() > 1000);
  CHECK(from_model == from_export);
  Run best = troupe("export --model-dir " + model + " --out " + (dir / "serving").string() +
                    " --checkpoint best");
  CHECK(best.status == 1);
  CHECK(best.err.find("no best checkpoint") != std::string::npos);
  Run labels = troupe("export --model-dir " + model + " --out " + (dir / "serving").string() +
                      " --class-labels a,b");
  CHECK(labels.status == 1);
  CHECK(labels.err.find("2 class labels for 3 classes") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train --model linear|svm|dnn|rnn [--regression] on a small table, defaults only") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_small_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A table in the shape of scikit-learn's wine data: 124 rows to train on, 54 to test, 13
  // columns on scales from 0.1 to 1000, three classes; and a regression target.
  std::mt19937 rng(2);
  std::normal_distribution<double> g(0, 1);
  for (const auto& [name, rows] :
       {std::pair<const char*, int>{"train.csv", 124}, {"test.csv", 54}}) {
    std::ofstream f(dir / name);
    for (int k = 0; k < 13; ++k) f << "f" << k << ",";
    f << "label,target\n";
    for (int i = 0; i < rows; ++i) {
      const int y = i % 3;
      double target = 0;
      for (int k = 0; k < 13; ++k) {
        const double scale = std::pow(10.0, k % 5 - 1);
        const double v = scale * (10 + (y - 1) * (k % 3 == 0 ? 1.5 : -1.0) + 0.7 * g(rng));
        target += (k + 1) * v / scale;
        f << v << ",";
      }
      f << y << "," << target << "\n";
    }
  }
  const std::string train = " --data csv:" + (dir / "train.csv").string();
  const std::string test = " --eval-data csv:" + (dir / "test.csv").string();
  auto accuracy_of = [](const std::string& out) {
    return out.rfind("{\"accuracy\": ", 0) == 0 ? std::stod(out.substr(13)) : -1.0;
  };
  auto loss_of = [](const std::string& out) {
    const size_t at = out.find("\"loss\": ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 8));
  };
  std::string dnn_out;
  for (const char* m : {"dnn", "linear", "svm", "rnn"}) {
    const std::string model = (dir / m).string();
    Run t = troupe(std::string("train --model ") + m + train + test +
                   " --label label --model-dir " + model);
    REQUIRE_MESSAGE(t.status == 0, t.err);
    if (std::string(m) == "dnn") dnn_out = t.out;
    CAPTURE(m);
    // The recurrent model reads the 13 columns as 13 steps of one number: an order they do
    // not have.
    CHECK(accuracy_of(t.out) >= (std::string(m) == "rnn" ? 0.9 : 0.95));
    std::ifstream info(model + "/troupe_model.txt");
    const std::string text((std::istreambuf_iterator<char>(info)), {});
    CHECK(text.find("model " + std::string(m) + "\n") != std::string::npos);
    CHECK(text.find("standardize f12 ") != std::string::npos);
  }
  // Standardization is what makes the defaults work on such columns.
  Run raw = troupe("train --model dnn" + train + test + " --label label --standardize off" +
                   " --model-dir " + (dir / "raw").string());
  REQUIRE_MESSAGE(raw.status == 0, raw.err);
  // Without it the network sees columns 10^4 apart: it may still separate most rows (0.91 on
  // one of our machines, below 0.9 on others), but fits them a hundred times worse.
  CHECK(accuracy_of(raw.out) < accuracy_of(dnn_out));
  CHECK_MESSAGE(loss_of(raw.out) > 100 * loss_of(dnn_out), raw.out, " against ", dnn_out);

  const std::string reg = (dir / "reg").string();
  Run r = troupe("train --model linear --regression" + train + test +
                 " --label target --model-dir " + reg);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.rfind("{\"loss\": ", 0) == 0);
  const size_t at = r.out.find("\"rmse\": ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(r.out.substr(at + 8)) < 1.0);  // the target spreads over about 40
  CHECK(r.out.find("\"mae\": ") != std::string::npos);
  Run e = troupe("evaluate --model-dir " + reg + " --data csv:" + (dir / "test.csv").string());
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.out == r.out);
  Run x = troupe("export --model-dir " + reg + " --out " + (dir / "serving").string());
  REQUIRE_MESSAGE(x.status == 0, x.err);
  const std::string version = x.out.substr(0, x.out.find('\n'));
  Run pm = troupe("predict --model-dir " + reg + " --data csv:" + (dir / "test.csv").string());
  Run pe = troupe("predict --export " + version + " --data csv:" + (dir / "test.csv").string());
  REQUIRE_MESSAGE(pe.status == 0, pe.err);
  CHECK(lines(pm.out) == 55);
  CHECK(pm.out == pe.out);

  // k-means on the same table: three clusters that are the three classes.
  Run km = troupe("train --model kmeans --n-clusters 3" + train + test +
                  " --label label --standardize off --model-dir " + (dir / "kmeans").string());
  REQUIRE_MESSAGE(km.status == 0, km.err);
  CHECK(km.out.rfind("{\"loss\": ", 0) == 0);
  const size_t ari = km.out.find("\"adjusted_rand_index\": ");
  REQUIRE(ari != std::string::npos);
  CHECK(km.out.find("\"inertia\": ") != std::string::npos);
  Run ke = troupe("evaluate --model-dir " + (dir / "kmeans").string() +
                  " --data csv:" + (dir / "test.csv").string());
  REQUIRE_MESSAGE(ke.status == 0, ke.err);
  CHECK(ke.out == km.out);

  // troupe search: a grid by 3-fold cross-validation; a huge L1 penalty must lose.
  const std::string results = (dir / "results.csv").string();
  Run sr = troupe("search --model linear" + train + " --label label --grid \"l1=10000,0 " +
                  "learning-rate=0.2\" --cv 3 --output " + results);
  REQUIRE_MESSAGE(sr.status == 0, sr.err);
  CHECK(sr.out.rfind("param_l1  param_learning_rate  split0_test_score", 0) == 0);
  CHECK(lines(sr.out) == 4);
  CHECK(sr.out.find("best: l1=0 learning_rate=0.2 (mean_test_score ") != std::string::npos);
  std::ifstream rf(results);
  std::string header;
  std::getline(rf, header);
  CHECK(header.rfind("param_l1,param_learning_rate,split0_test_score", 0) == 0);
  Run sd = troupe("search --model dnn" + train + " --label label --epochs 2 --grid " +
                  "\"hidden=8;16,8\" --random 1 --cv 2");
  REQUIRE_MESSAGE(sd.status == 0, sd.err);
  CHECK(lines(sd.out) == 3);
  // Further metrics of a classifier, in training's JSON line and evaluate's alike.
  const std::string scored = (dir / "scored").string();
  Run ms = troupe(
      "train --model dnn" + train + test +
      " --label label --epochs 2 --metrics f1_macro,mean_iou,top_1_accuracy --model-dir " + scored);
  REQUIRE_MESSAGE(ms.status == 0, ms.err);
  CHECK(ms.out.find("\"f1_macro\": ") != std::string::npos);
  CHECK(ms.out.find("\"mean_iou\": ") != std::string::npos);
  // The label among the best one score is the accuracy.
  auto figure = [&](const std::string& name) {
    const size_t at = ms.out.find("\"" + name + "\": ");
    REQUIRE_MESSAGE(at != std::string::npos, name, " in ", ms.out);
    return std::stod(ms.out.substr(at + name.size() + 4));
  };
  CHECK(figure("top_1_accuracy") == doctest::Approx(figure("accuracy")).epsilon(1e-3));
  Run me = troupe("evaluate --model-dir " + scored + " --data csv:" + (dir / "test.csv").string());
  REQUIRE_MESSAGE(me.status == 0, me.err);
  CHECK(me.out == ms.out);

  // Schedules are params like any other: trained with, kept, searched over.
  const std::string cosine = (dir / "cosine").string();
  Run sc = troupe("train --model dnn" + train + test + " --label label --lr-schedule cosine " +
                  "--decay-steps 20 --warmup-steps 5 --eval-every 10 --reduce-lr-on-plateau 2 " +
                  "--model-dir " + cosine);
  REQUIRE_MESSAGE(sc.status == 0, sc.err);
  CHECK(accuracy_of(sc.out) >= 0.9);
  {
    std::ifstream info(cosine + "/troupe_model.txt");
    const std::string text((std::istreambuf_iterator<char>(info)), {});
    CHECK(text.find("param lr_schedule cosine\n") != std::string::npos);
    CHECK(text.find("param warmup_steps 5\n") != std::string::npos);
    CHECK(text.find("param decay_steps 20\n") != std::string::npos);
  }
  Run ss = troupe("search --model dnn" + train + " --label label --epochs 2 --grid " +
                  "\"lr-schedule=constant,cosine decay-steps=10\" --cv 2");
  REQUIRE_MESSAGE(ss.status == 0, ss.err);
  CHECK(ss.out.rfind("param_decay_steps  param_lr_schedule", 0) == 0);
  CHECK(lines(ss.out) == 4);
  for (const auto& [args, says] :
       {std::pair<std::string, std::string>{"--grid \"depth=2\"", "no parameter 'depth'"},
        {"--grid \"l1=x\"", "'x' is not a value of l1"},
        {"--grid \"l1\"", "'l1' is not NAME=VALUES"},
        {"--grid \"l1=1\" --cv 1", "--cv"}}) {
    Run bad = troupe("search --model linear" + train + " --label label " + args);
    CAPTURE(args);
    CHECK(bad.status == 2);
    CHECK(bad.err.find(says) != std::string::npos);
  }

  for (const auto& [args, says] :
       {std::pair<std::string, std::string>{"--model linear --hidden 8",
                                            "--hidden is not a flag of --model linear"},
        {"--model dnn --l1 0.1", "--l1 is not a flag of --model dnn"},
        {"--model dnn --regression --n-classes 3", "a regressor has no classes"},
        {"--model tree",
         "--model 'tree' is not dnn, linear, svm, kmeans, wide_deep, "
         "boosted_trees, random_forest or rnn"},
        {"--model rnn --cell rnn", "cell_type: 'rnn' is not lstm or gru"},
        {"--model dnn --metrics f1_avg", "metrics: 'f1_avg' is not precision_"},
        {"--model linear --regression --metrics f1_macro", "has no parameter 'metrics'"},
        {"--model rnn --hidden 8", "--hidden is not a flag of --model rnn"},
        {"--model boosted_trees --epochs 3", "trains until its trees are grown"},
        {"--model boosted_trees --max-depth 0", "max_depth"},
        {"--model random_forest --hidden 8", "--hidden is not a flag of --model random_forest"},
        {"--model kmeans --regression", "k-means clusters"},
        {"--model kmeans --hidden 8", "--hidden is not a flag of --model kmeans"},
        {"--model linear --l2 -1", "l2"},
        {"--model svm --standardize maybe", "--standardize: 'maybe'"},
        {"--model dnn --lr-schedule linear", "lr_schedule: 'linear' is not valid"},
        {"--model dnn --lr-schedule cosine --decay-steps 0", "decay_steps is below 1"},
        {"--model boosted_trees --lr-schedule cosine",
         "--lr-schedule is not a flag of --model boosted_trees"},
        {"--model dnn --reduce-lr-on-plateau 2", "give --eval-every N"},
        {"--model kmeans --reduce-lr-on-plateau 2 --eval-every 5", "no learning rate to lower"}}) {
    Run bad =
        troupe("train " + args + train + " --label label --model-dir " + (dir / "bad").string());
    CAPTURE(args);
    CHECK(bad.status == 2);
    CHECK(bad.err.find(says) != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe train / evaluate / predict / search on libsvm files, labels -1 and +1") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_svm_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // svmlight's layout: 1-based indices, small values left out; the class is a linear rule.
  std::mt19937 rng(3);
  std::normal_distribution<double> g(0, 1);
  for (const auto& [name, rows] :
       {std::pair<const char*, int>{"train.svm", 800}, {"test.svm", 300}}) {
    std::ofstream f(dir / name);
    for (int i = 0; i < rows; ++i) {
      double x[5];
      for (double& v : x) v = g(rng);
      f << (3 * x[0] - 2 * x[3] > 0 ? "+1" : "-1");
      for (int k = 0; k < 5; ++k) {
        if (std::abs(x[k]) > 0.3) f << " " << k + 1 << ":" << x[k];
      }
      f << (i % 7 == 0 ? " # a comment\n" : "\n");
    }
  }
  std::ofstream(dir / "wide.svm") << "+1 1:1 9:2\n";
  const std::string train = "libsvm:" + (dir / "train.svm").string();
  const std::string test = "libsvm:" + (dir / "test.svm").string();
  const std::string model = (dir / "m").string();
  Run tr = troupe("train --model linear --data " + train + " --eval-data " + test +
                  " --model-dir " + model);
  REQUIRE_MESSAGE(tr.status == 0, tr.err);
  CHECK(std::stod(tr.out.substr(tr.out.find("\"accuracy\": ") + 12)) >= 0.9);
  std::ifstream info_file(dir / "m" / "troupe_model.txt");
  const std::string info((std::istreambuf_iterator<char>(info_file)), {});
  CHECK(info.find("libsvm_features 5\n") != std::string::npos);
  CHECK(info.find("param label_vocabulary -1,1\n") != std::string::npos);
  CHECK(info.find("standardize features ") != std::string::npos);

  Run ev = troupe("evaluate --model-dir " + model + " --data " + test);
  REQUIRE_MESSAGE(ev.status == 0, ev.err);
  CHECK(ev.out == tr.out);
  Run pr = troupe("predict --model-dir " + model + " --data " + test);
  REQUIRE_MESSAGE(pr.status == 0, pr.err);
  CHECK(lines(pr.out) == 301);
  CHECK(pr.out.find("\n-1,") != std::string::npos);  // the classes by their names
  CHECK(pr.out.find("\n1,") != std::string::npos);
  Run sr = troupe("search --model linear --data " + train + " --grid \"l1=10000,0\" --cv 3");
  REQUIRE_MESSAGE(sr.status == 0, sr.err);
  CHECK(sr.out.find("best: l1=0 ") != std::string::npos);

  // A row wider than the model's, and a label flag: one line each, naming the problem.
  Run wide =
      troupe("evaluate --model-dir " + model + " --data libsvm:" + (dir / "wide.svm").string());
  CHECK(wide.status != 0);
  CHECK(wide.err.find("wide.svm:1: feature index 9 is beyond the 5 features") != std::string::npos);
  Run label = troupe("train --data " + train + " --label y --model-dir " + (dir / "x").string());
  CHECK(label.status != 0);
  CHECK(label.err.find("a libsvm file's label is the first field") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe: bad flags and bad data are one line and a non-zero exit") {
  struct Case {
    std::string args, says;
    int status;
  };
  const std::string nowhere = "/nonexistent/troupe";
  for (const Case& c : std::vector<Case>{
           {"train --model dnn --data fashion-mnist --model-dir x --epochs abc", "--epochs: 'abc'",
            2},
           {"train --model dnn --data fashion-mnist --model-dir x --bogus 1",
            "unknown flag --bogus", 2},
           {"train --model tree --data fashion-mnist --model-dir x", "--model 'tree'", 2},
           {"train --model dnn --data fashion-mnist --model-dir x --export soon",
            "--export: 'soon'", 2},
           {"train --model dnn --data parquet:x --model-dir x", "--data 'parquet:x'", 1},
           {"train --model dnn --data csv:/nonexistent/*.csv --label y --model-dir x",
            "no file matches", 1},
           {"evaluate --model-dir " + nowhere + " --data fashion-mnist", "holds no troupe model",
            1},
           {"frobnicate", "unknown command 'frobnicate'", 2},
           {"export --model-dir " + nowhere + " --out x", "holds no troupe model", 1},
           {"export --model-dir x", "--out", 2},
           {"predict --model-dir a --export b --data fashion-mnist", "one of them", 2},
           {"serve --model_name m", "--model_base_path", 2},
           {"serve --model_base_path " + nowhere, "no model folder", 1},
           {"serve --model_base_path . --port 70000", "not a port", 2},
           {"serve --model_base_path . --port 9000 --rest_api_port 9000", "both 9000", 2},
           {"serve --model_base_path . --max_batch_size 0", "--max_batch_size", 2},
           {"serve --model_config_file m.config --model_name m",
            "without --model_base_path and --model_name", 2},
           {"serve --model_config_file " + nowhere, nowhere + ": cannot read it", 1},
       }) {
    Run r = troupe(c.args);
    CHECK_MESSAGE(r.status == c.status, c.args);
    CHECK_MESSAGE(lines(r.err) == 1, c.args, ": ", r.err);
    CHECK_MESSAGE(r.err.find(c.says) != std::string::npos, c.args, ": ", r.err);
  }
}

TEST_CASE("troupe train: class names with commas train, are kept and are predicted") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_commas_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "t.csv").string();
  {
    std::ofstream out(csv);
    out << "x1,x2,kind\n";
    const char* names[] = {"\"red, dark\"", "blue", "\"green, light\""};
    for (int i = 0; i < 300; ++i) {
      const int c = i % 3;
      out << c + 0.01 * (i % 7) << "," << -c - 0.01 * (i % 5) << "," << names[c] << "\n";
    }
  }
  const std::string model = (dir / "m").string();
  Run trained = troupe("train --model linear --data csv:" + csv + " --label kind --steps 200" +
                       " --model-dir " + model);
  REQUIRE_MESSAGE(trained.status == 0, trained.err);
  Run predicted = troupe("predict --model-dir " + model + " --data csv:" + csv + " --label kind");
  REQUIRE_MESSAGE(predicted.status == 0, predicted.err);
  // A class named with a comma comes back whole (quoted, as CSV writes it).
  CHECK(predicted.out.find("\"red, dark\",") != std::string::npos);
  CHECK(predicted.out.find("\"green, light\",") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe COMMAND --help prints that command's usage and options, exit 0") {
  struct Case {
    std::string command, says;
  };
  for (const Case& c : std::vector<Case>{
           {"train", "--early-stopping-rounds"},
           {"evaluate", "--model-dir DIR --data DATA"},
           {"predict", "--signature"},
           {"export", "--class-labels"},
           {"search", "--grid"},
           {"serve", "--max_batch_size"},
           {"server", "--advertise-data-port"},
           {"cluster", "--workers counts the chief"},
           {"secret", "troupe secret FILE"},
           {"convert", "the format PATH's suffix names"},
       }) {
    for (const char* flag : {"--help", "-h"}) {
      Run r = troupe(c.command + " " + flag);
      CHECK_MESSAGE(r.status == 0, c.command, " ", flag, ": ", r.err);
      CHECK_MESSAGE(r.out.rfind("usage: troupe " + c.command + " ", 0) == 0, c.command, r.out);
      CHECK_MESSAGE(r.out.find(c.says) != std::string::npos, c.command, ": ", r.out);
      CHECK_MESSAGE(r.err.empty(), c.command, ": ", r.err);
    }
  }
  // Wherever it stands among the command's flags; after cluster's `--` it is the task's, not
  // cluster's, so cluster reads its own flags and refuses the missing task command.
  CHECK(troupe("train --model dnn --help").status == 0);
  Run task = troupe("cluster --ps 1 -- evaluate --help");
  CHECK(task.status == 2);
  CHECK(task.err.find("the tasks' command comes after --") != std::string::npos);
  // The whole usage names every command once and points at the per-command help.
  Run all = troupe("--help");
  CHECK(all.status == 0);
  for (const char* c : {"train", "evaluate", "predict", "export", "search", "serve", "server",
                        "cluster", "secret", "convert"}) {
    CHECK_MESSAGE(all.out.find(std::string("troupe ") + c + " ") != std::string::npos, c);
  }
  CHECK(all.out.find("troupe COMMAND --help") != std::string::npos);
}

TEST_CASE("troupe train on TFRecord files of tf.Example: the accuracy of the same rows as CSV") {
  const std::filesystem::path dir = fresh_dir("tfrecord");
  // Written by another program (Python's protobuf), with the same rows as CSV beside them.
  for (const auto& [name, n] : {std::pair{"train", 600}, {"test", 200}}) {
    const std::string base = (dir / name).string();
    const std::string command = std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " +
                                base + ".tfrecord.gz " + std::to_string(n) + " gzip --table " +
                                base + ".csv";
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  }
  auto train = [&](const std::string& kind, const std::string& suffix) {
    return troupe("train --model linear --data " + kind + ":" + (dir / "train").string() + suffix +
                  " --eval-data " + kind + ":" + (dir / "test").string() + suffix +
                  " --label label --model-dir " + (dir / kind).string() +
                  " --epochs 5 --batch-size 32 --seed 3");
  };
  Run tfrecord = train("tfrecord", ".tfrecord.gz");
  REQUIRE_MESSAGE(tfrecord.status == 0, tfrecord.err);
  CHECK(tfrecord.err.find("features inferred from 100 records: a: float32 [], b: float32 [], "
                          "label: int64 []") != std::string::npos);
  Run csv = train("csv", ".csv");
  REQUIRE_MESSAGE(csv.status == 0, csv.err);
  const double accuracy = std::stod(tfrecord.out.substr(13));
  CHECK(accuracy > 0.8);
  CHECK(tfrecord.out == csv.out);
  // A label the files do not have, and a varying feature, are one line each.
  Run no_label = troupe("train --model linear --data tfrecord:" + (dir / "train").string() +
                        ".tfrecord.gz --label y --model-dir " + (dir / "x").string());
  CHECK(no_label.status != 0);
  CHECK(no_label.err.find("no column 'y' for the label") != std::string::npos);
  const std::string varying = (dir / "varying.tfrecord").string();
  REQUIRE(std::system((std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " + varying +
                       " 20 none --varlen")
                          .c_str()) == 0);
  Run sparse = troupe("train --model linear --data tfrecord:" + varying + " --label label" +
                      " --model-dir " + (dir / "y").string());
  CHECK(sparse.status != 0);
  CHECK(sparse.err.find("feature 'tags' has a varying number of values") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe train --model rnn on TFRecord files of tf.train.SequenceExample") {
  const std::filesystem::path dir = fresh_dir("sequence");
  // Written by another program: "frames" lists of 3 to 5 steps, whose first number's sign is the
  // label (flipped for one example in ten); cut or padded to the longest, 5 steps of 2.
  for (const auto& [name, n] : {std::pair{"train", 600}, {"test", 200}}) {
    const std::string command = std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " +
                                (dir / name).string() + ".tfrecord " + std::to_string(n) +
                                " none --sequence";
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  }
  Run r = troupe("train --model rnn --time-steps 5 --rnn-units 16 --data tfrecord:" +
                 (dir / "train.tfrecord").string() + " --eval-data tfrecord:" +
                 (dir / "test.tfrecord").string() + " --label label --model-dir " +
                 (dir / "model").string() + " --epochs 30 --seed 3");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("frames: float32 [2] sequence, label: int64 []") != std::string::npos);
  CHECK(r.err.find("sequences of 5 steps") != std::string::npos);
  CHECK(std::stod(r.out.substr(13)) > 0.85);  // 0.9 is the most: a tenth of labels flipped

  // Sequences padded to a length of the user's: the model keeps it, so that evaluate and
  // predict read files whose own longest sequence is shorter (5) at the model's 6 steps.
  const std::string model6 = (dir / "model6").string();
  Run six = troupe(
      "train --model rnn --time-steps 6 --sequence-length 6 --rnn-units 16 --data "
      "tfrecord:" +
      (dir / "train.tfrecord").string() + " --label label --model-dir " + model6 +
      " --epochs 30 --seed 3");
  REQUIRE_MESSAGE(six.status == 0, six.err);
  CHECK(six.err.find("frames: float32 [2] sequence") != std::string::npos);
  Run e = troupe("evaluate --model-dir " + model6 +
                 " --data tfrecord:" + (dir / "test.tfrecord").string());
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(std::stod(e.out.substr(e.out.find("\"accuracy\": ") + 12)) > 0.85);
  Run p = troupe("predict --model-dir " + model6 +
                 " --data tfrecord:" + (dir / "test.tfrecord").string());
  REQUIRE_MESSAGE(p.status == 0, p.err);
  CHECK(std::count(p.out.begin(), p.out.end(), '\n') == 201);  // a header and 200 rows
  CHECK(troupe("train --model rnn --sequence-length -1 --data tfrecord:x --model-dir " + model6)
            .status == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe convert: CSV to TFRecord and back, the same rows; a bad suffix is a usage error") {
  const std::filesystem::path dir = fresh_dir("convert");
  const std::string csv = (dir / "in.csv").string();
  std::ofstream(csv) << "a,b,name,label\n0.5,-1.25,\"x, y\",1\n2,3.75,z,0\n";
  const std::string tfrecord = (dir / "t.tfrecord.gz").string();
  Run to = troupe("convert --data csv:" + csv + " --out " + tfrecord);
  REQUIRE_MESSAGE(to.status == 0, to.err);
  Run back = troupe("convert --data tfrecord:" + tfrecord + " --out " + (dir / "out.csv").string());
  REQUIRE_MESSAGE(back.status == 0, back.err);
  std::ifstream in(dir / "out.csv");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Components in the TFRecord's (sorted) order; quoting kept.
  CHECK(text == "a,b,label,name\n0.5,-1.25,1,\"x, y\"\n2,3.75,0,z\n");
  // A feature of several values becomes a column each.
  const std::string python = (dir / "p.tfrecord").string();
  REQUIRE(std::system(
              (std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " + python + " 2 none")
                  .c_str()) == 0);
  Run wide = troupe("convert --data tfrecord:" + python + " --out " + (dir / "p.csv").string());
  REQUIRE_MESSAGE(wide.status == 0, wide.err);
  std::ifstream p(dir / "p.csv");
  const std::string rows((std::istreambuf_iterator<char>(p)), std::istreambuf_iterator<char>());
  CHECK(rows == "id,label,word,x_0,x_1\n0,0,w0,0,0\n1,1,w1,1,-1\n");
  Run bad = troupe("convert --data csv:" + csv + " --out " + (dir / "x.bin").string());
  CHECK(bad.status == 2);
  CHECK(bad.err.find("the suffix says the format") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe secret --reader: an evaluator's secret from the job's, not the job's own") {
  const std::filesystem::path dir = fresh_dir("secret");
  const std::string job = (dir / "job.secret").string(), reader = (dir / "reader.secret").string();
  REQUIRE(troupe("secret " + job).status == 0);
  Run r = troupe("secret --reader " + job + " " + reader);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("give it to the evaluator") != std::string::npos);
  std::string job_line, reader_line;
  std::getline(std::ifstream(job), job_line);
  std::getline(std::ifstream(reader), reader_line);
  CHECK(reader_line.rfind("reader ", 0) == 0);
  CHECK(reader_line.substr(7) != job_line);
  CHECK((std::filesystem::status(reader).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  // A reader's secret of a reader's secret is itself; a missing job secret is named.
  REQUIRE(troupe("secret --reader " + reader + " " + (dir / "again").string()).status == 0);
  std::string again;
  std::getline(std::ifstream(dir / "again"), again);
  CHECK(again == reader_line);
  Run missing = troupe("secret --reader " + (dir / "none").string() + " " + reader);
  CHECK(missing.status != 0);
  CHECK(missing.err.find((dir / "none").string()) != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe train: Ctrl-C stops training gracefully with a checkpoint and the metrics") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_int_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "train.csv");
    f << "a,b,label\n";
    for (int i = 0; i < 400; ++i) f << i % 7 << "," << i % 5 << "," << i % 2 << "\n";
  }
  const std::string model = (dir / "model").string();
  // Interrupt once training runs (its event file exists), as a user at a terminal would.
  const std::string train = std::string(TROUPE_CLI) +
                            " train --model dnn --data csv:" + (dir / "train.csv").string() +
                            " --label label --model-dir " + model + " --epochs 100000 --hidden 8";
  Run r = shell(train + " & pid=$!; for i in $(seq 600); do ls " + model +
                "/events.out.tfevents.* >/dev/null 2>&1 && break; sleep 0.05; done; sleep 0.5; "
                "kill -INT $pid; wait $pid");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("INFO: interrupted") != std::string::npos);
  REQUIRE(lines(r.out) == 1);
  const size_t at = r.out.find("\"global_step\": ");
  REQUIRE(at != std::string::npos);
  const long step = std::stol(r.out.substr(at + 15));
  CHECK(step > 0);
  CHECK(step < 100000L * 13);
  std::ifstream index(model + "/checkpoint");
  std::string first;
  std::getline(index, first);
  CHECK(first == "model_checkpoint_path: \"model.ckpt-" + std::to_string(step) + "\"");
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train: a class count or layer width too large for memory is an error, not an abort") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_big_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "huge_label.csv") << "a,b,label\n1,2,0\n3,4,5000000000\n";
    std::ofstream(dir / "wide.csv") << "a,b,label\n1,2,0\n3,4,1\n";
    std::ofstream(dir / "many.csv") << "a,b,label\n1,2,0\n3,4,2000000000\n";
  }
  int n = 0;
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"--data csv:" + (dir / "huge_label.csv").string(), "not a class number"},
           {"--data csv:" + (dir / "wide.csv").string() + " --hidden 1000000000000",
            "dnn/hiddenlayer_0"},
           {"--data csv:" + (dir / "many.csv").string(), "dnn/logits"},
       }) {
    const std::string model = " --model-dir " + (dir / std::to_string(n++)).string();
    Run r = troupe("train --model dnn --label label --steps 1 " + c.args + model);
    CHECK_MESSAGE(r.status == 1, c.args, ": ", r.err);
    CHECK_MESSAGE(lines(r.err) >= 1, c.args);
    CHECK_MESSAGE(r.err.find(c.says) != std::string::npos, c.args, ": ", r.err);
  }
  std::filesystem::remove_all(dir);
}

// The flags that serve the model under `exports` as m.
std::string model_m(const std::string& exports) {
  return "--model_base_path " + exports + " --model_name m";
}

// troupe serve of the models its flags name, started on a free port (--port 0, read from its
// log line, d/serve.err); one POST of `body` to /v1/models/<path> through bash's /dev/tcp, then
// Ctrl-C: the answer, then "exit <status>" of the server.
Run serve_once(const std::string& d, const std::string& models, const std::string& path,
               const std::string& body) {
  std::ofstream(d + "/serve.sh") << "set -u\n"
                                 << TROUPE_CLI << " serve " << models
                                 << " --port 0 --rest_api_port 0 2> " << d << "/serve.err &\n"
                                 << "pid=$!\n"
                                 << "for i in $(seq 200); do grep -q 'serving model' " << d
                                 << "/serve.err && break; sleep 0.05; done\n"
                                 << "port=$(sed -n 's|.*http://127.0.0.1:\\([0-9]*\\)/.*|\\1|p' "
                                 << d << "/serve.err)\n"
                                 << "body='" << body << "'\n"
                                 << "exec 3<>/dev/tcp/127.0.0.1/$port\n"
                                 << "printf 'POST /v1/models/" << path
                                 << " HTTP/1.1\\r\\nHost: t\\r\\nConnection: close\\r\\n"
                                    "Content-Length: %d\\r\\n\\r\\n%s' ${#body} \"$body\" >&3\n"
                                 << "cat <&3\n"
                                 << "kill -INT $pid\n"
                                 << "wait $pid\n"
                                 << "echo \"exit $?\"\n";
  return shell("bash " + d + "/serve.sh");
}

// A model of `model_flags` trained for 20 steps on a table of a, b and a 0/1 label in d, and
// exported under d/exports.
void export_ab_model(const std::string& d, const std::string& model_flags) {
  {
    std::ofstream f(d + "/train.csv");
    f << "a,b,label\n";
    for (int i = 0; i < 200; ++i) f << i % 7 << "," << i % 5 << "," << i % 2 << "\n";
  }
  Run trained = troupe("train " + model_flags + " --data csv:" + d + "/train.csv --label label" +
                       " --model-dir " + d + "/model --steps 20");
  REQUIRE_MESSAGE(trained.status == 0, trained.err);
  REQUIRE(troupe("export --model-dir " + d + "/model --out " + d + "/exports").status == 0);
}

TEST_CASE("troupe serve: an export answers over HTTP until Ctrl-C, which it survives cleanly") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_serve_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string d = dir.string();
  export_ab_model(d, "--model dnn --hidden 8");
  Run r = serve_once(d, model_m(d + "/exports"), "m:predict",
                     R"({"instances": [{"a": 1, "b": 2}, {"a": 3, "b": 0}]})");
  CHECK_MESSAGE(r.out.find("HTTP/1.1 200 OK") != std::string::npos, r.out, r.err);
  CHECK(r.out.find("\"predictions\":[{\"classes\":") != std::string::npos);
  CHECK(r.out.find("exit 0") != std::string::npos);
  std::ifstream log(dir / "serve.err");
  const std::string said((std::istreambuf_iterator<char>(log)), {});
  CHECK_MESSAGE(said.find("INFO: stopped") != std::string::npos, said);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe serve --model_config_file: models by name and by label; a bad file by line") {
  const std::filesystem::path dir = fresh_dir("serve_config");
  const std::string d = dir.string();
  export_ab_model(d, "--model linear");
  std::string version;
  for (const auto& e : std::filesystem::directory_iterator(dir / "exports")) {
    version = e.path().filename().string();
  }
  std::ofstream(dir / "models.config")
      << "model_config_list {\n"
      << "  config { name: 'm' base_path: '" << d << "/exports' model_platform: 'tensorflow' }\n"
      << "  config { name: 'n' base_path: '" << d << "/exports'\n"
      << "           version_labels { key: 'stable' value: " << version << " } }\n"
      << "}\n";
  Run r = serve_once(d, "--model_config_file " + d + "/models.config", "n/labels/stable:predict",
                     R"({"instances": [{"a": 1, "b": 2}]})");
  CHECK_MESSAGE(r.out.find("HTTP/1.1 200 OK") != std::string::npos, r.out, r.err);
  CHECK(r.out.find("\"predictions\":[{\"classes\":") != std::string::npos);
  CHECK(r.out.find("exit 0") != std::string::npos);
  std::ifstream log(dir / "serve.err");
  const std::string said((std::istreambuf_iterator<char>(log)), {});
  CHECK_MESSAGE(said.find("serving models m, n at http://") != std::string::npos, said);
  CHECK(said.find("gRPC (TF Serving's PredictionService and ModelService) at 127.0.0.1:") !=
        std::string::npos);

  std::ofstream(dir / "bad.config")
      << "model_config_list {\n  config { name: 'm' base_pth: 'x' }\n}";
  Run bad = troupe("serve --model_config_file " + d + "/bad.config");
  CHECK(bad.status == 1);
  CHECK_MESSAGE(bad.err.find(d + "/bad.config: line 2, column") != std::string::npos, bad.err);
  CHECK(bad.err.find("base_pth") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train --columns on TFRecord: a feature of varying length parsed as its column "
    "reads it, to evaluation, export and :classify of tf.Example") {
  const std::filesystem::path dir = fresh_dir("varlen_columns");
  const std::string d = dir.string();
  // A learnable table ("a", "b") with "tags", 0 to 2 int64s an example, written by another
  // program; the columns read tags as ids through an embedding, so they are a sparse tensor.
  const std::string command = std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " + d +
                              "/t.tfrecord 2000 none --table " + d + "/t.csv --varlen";
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  std::ofstream(dir / "columns.txt")
      << "numeric a\nnumeric b\nidentity tags buckets=3 embedding=2\n";
  const std::string data = " --data tfrecord:" + d + "/t.tfrecord";
  Run inferred = troupe("train --model dnn" + data + " --model-dir " + d + "/x");
  CHECK(inferred.status == 1);
  CHECK(inferred.err.find("give --columns that read it") != std::string::npos);
  Run r = troupe("train --model dnn" + data + " --columns " + d + "/columns.txt --model-dir " + d +
                 "/model --epochs 5 --hidden 16 --seed 1");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(std::stod(r.out.substr(13)) > 0.8);  // 0.9 is the most: a tenth of labels flipped
  Run e = troupe("evaluate --model-dir " + d + "/model" + data);
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.out == r.out);
  REQUIRE(troupe("export --model-dir " + d + "/model --out " + d + "/exports").status == 0);
  // TF Serving's classify: each example a tf.Example, tags a list of any length, parsed in the
  // export's graph.
  Run c = serve_once(d, model_m(d + "/exports"), "m:classify",
                     R"({"examples": [{"a": 2.5, "b": 2.0, "tags": [0, 1]}, )"
                     R"({"a": -2.0, "b": -1.5, "tags": []}]})");
  CHECK_MESSAGE(c.out.find("HTTP/1.1 200 OK") != std::string::npos, c.out, c.err);
  // [["0", p0], ["1", p1]] an example: class 1's probability, example by example.
  std::vector<double> p1;
  for (size_t at = c.out.find("[\"1\","); at != std::string::npos;
       at = c.out.find("[\"1\",", at + 1)) {
    p1.push_back(std::stod(c.out.substr(at + 5)));
  }
  REQUIRE(p1.size() == 2);
  CHECK(p1[0] > 0.5);  // a + b > 0: class 1
  CHECK(p1[1] < 0.5);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train --model rnn over a sequence column: token lists of any length, to evaluation, "
    "export and :classify") {
  const std::filesystem::path dir = fresh_dir("sequence_columns");
  const std::string d = dir.string();
  // "tokens", 2 to 9 ids in [0, 6) an example; the label says whether the last exceeds the first.
  const std::string command = std::string("/usr/bin/python3 ") + TROUPE_TFRECORD_WRITER + " " + d +
                              "/t.tfrecord 3000 none --tokens";
  REQUIRE_MESSAGE(std::system(command.c_str()) == 0, command);
  std::ofstream(dir / "columns.txt") << "sequence_identity tokens buckets=6 embedding=8\n";
  const std::string data = " --data tfrecord:" + d + "/t.tfrecord";
  Run r = troupe("train --model rnn" + data + " --columns " + d + "/columns.txt --model-dir " + d +
                 "/model --epochs 20 --rnn-units 16 --learning-rate 0.02 --seed 1");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(std::stod(r.out.substr(13)) > 0.95);
  Run e = troupe("evaluate --model-dir " + d + "/model" + data);
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.out == r.out);
  REQUIRE(troupe("export --model-dir " + d + "/model --out " + d + "/exports").status == 0);
  // Three sequences of 3, 2 and 8 steps in one call: last > first, no, yes.
  Run c = serve_once(d, model_m(d + "/exports"), "m:classify",
                     R"({"examples": [{"tokens": [1, 2, 5]}, {"tokens": [4, 0]}, )"
                     R"({"tokens": [3, 1, 2, 2, 0, 5, 1, 4]}]})");
  CHECK_MESSAGE(c.out.find("HTTP/1.1 200 OK") != std::string::npos, c.out, c.err);
  std::vector<double> p1;
  for (size_t at = c.out.find("[\"1\","); at != std::string::npos;
       at = c.out.find("[\"1\",", at + 1)) {
    p1.push_back(std::stod(c.out.substr(at + 5)));
  }
  REQUIRE(p1.size() == 3);
  CHECK(p1[0] > 0.5);
  CHECK(p1[1] < 0.5);
  CHECK(p1[2] > 0.5);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train --model rnn on a CSV whose sequence column holds space-separated ids, with a "
    "context column beside it") {
  const std::filesystem::path dir = fresh_dir("csv_sequences");
  const std::string d = dir.string();
  // 2 to 9 ids in [0, 6) a row; the label says whether the last exceeds the first, flipped
  // where "flip" is 1 (a context feature every step sees).
  std::mt19937 rng(3);
  {
    std::ofstream f(dir / "t.csv");
    f << "tokens,flip,label\n";
    for (int i = 0; i < 3000; ++i) {
      const int n = 2 + static_cast<int>(rng() % 8);
      std::vector<int> t(n);
      for (int& v : t) v = static_cast<int>(rng() % 6);
      for (int k = 0; k < n; ++k) f << (k ? " " : "") << t[k];
      const int flip = static_cast<int>(rng() % 2);
      f << "," << flip << "," << ((t.back() > t.front()) != (flip == 1)) << "\n";
    }
  }
  std::ofstream(dir / "p.csv") << "tokens,flip\n1 2 5,0\n4 0,0\n3 1 2 2 0 5 1 4,1\n";
  std::ofstream(dir / "columns.txt")
      << "sequence_identity tokens buckets=6 embedding=8\nnumeric flip\n";
  Run r = troupe("train --model rnn --data csv:" + d + "/t.csv --label label --columns " + d +
                 "/columns.txt --model-dir " + d +
                 "/model --epochs 20 --rnn-units 16 --learning-rate 0.02 --seed 1");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(std::stod(r.out.substr(13)) > 0.95);
  Run p = troupe("predict --model-dir " + d + "/model --data csv:" + d + "/p.csv");
  REQUIRE_MESSAGE(p.status == 0, p.err);
  // Sequences of 3, 2 and 8 steps: last > first, no, yes (flipped).
  std::vector<char> classes;
  for (size_t at = p.out.find('\n'); at + 1 < p.out.size(); at = p.out.find('\n', at + 1)) {
    classes.push_back(p.out[at + 1]);
  }
  CHECK(p.out.rfind("class,p0,p1\n", 0) == 0);
  CHECK(classes == std::vector<char>{'1', '0', '0'});
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe train --label kind,size: one model, a head per label column, served per head") {
  const std::filesystem::path dir = fresh_dir("multi_head");
  const std::string d = dir.string();
  // kind (text) is whether x0 + x1 > 0; size (a number) is 3 x0 - x1, one more when red.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& [name, rows] :
       {std::pair<const char*, int>{"train.csv", 2000}, {"test.csv", 400}}) {
    std::ofstream f(dir / name);
    f << "x0,x1,color,kind,size\n";
    for (int i = 0; i < rows; ++i) {
      const double x0 = u(rng), x1 = u(rng);
      const bool red = rng() % 2;
      f << x0 << "," << x1 << "," << (red ? "red" : "green") << ","
        << (x0 + x1 > 0 ? "big" : "small") << "," << 3 * x0 - x1 + (red ? 1 : 0) << "\n";
    }
  }
  const std::string data = " --data csv:" + d + "/train.csv --eval-data csv:" + d + "/test.csv";
  Run r = troupe("train --model dnn" + data + " --label kind,size --model-dir " + d +
                 "/model --epochs 20 --hidden 32,16 --seed 1");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("head 'kind': a classifier of 2 classes") != std::string::npos);
  CHECK(r.err.find("head 'size': a regressor") != std::string::npos);
  auto metric = [&](const std::string& out, const std::string& name) {
    const size_t at = out.find("\"" + name + "\": ");
    REQUIRE_MESSAGE(at != std::string::npos, name, out);
    return std::stod(out.substr(at + name.size() + 4));
  };
  CHECK(metric(r.out, "accuracy/kind") > 0.95);
  CHECK(metric(r.out, "rmse/size") < 0.3);
  CHECK(metric(r.out, "loss") ==
        doctest::Approx(metric(r.out, "loss/kind") + metric(r.out, "loss/size")).epsilon(2e-3));
  Run e = troupe("evaluate --model-dir " + d + "/model --data csv:" + d + "/test.csv");
  REQUIRE_MESSAGE(e.status == 0, e.err);
  CHECK(e.out == r.out);
  Run p = troupe("predict --model-dir " + d + "/model --data csv:" + d + "/test.csv");
  REQUIRE_MESSAGE(p.status == 0, p.err);
  CHECK(p.out.rfind("kind/class_labels,kind/classes,", 0) == 0);
  CHECK(p.out.find(",size/predictions\n") != std::string::npos);
  REQUIRE(troupe("export --model-dir " + d + "/model --out " + d + "/exports").status == 0);
  Run c = serve_once(d, model_m(d + "/exports"), "m:classify",
                     R"({"signature_name": "kind", "examples": [{"x0": 0.5, "x1": 0.25, )"
                     R"("color": "red"}]})");
  CHECK_MESSAGE(c.out.find("{\"results\":[[[\"big\",") != std::string::npos, c.out);
  Run v = serve_once(d, model_m(d + "/exports"), "m:regress",
                     R"({"signature_name": "size", "examples": [{"x0": 0.5, "x1": 0.25, )"
                     R"("color": "red"}]})");
  const size_t at = v.out.find("{\"results\":[");
  REQUIRE_MESSAGE(at != std::string::npos, v.out);
  CHECK(std::abs(std::stod(v.out.substr(at + 12)) - 2.25) < 0.4);  // 1.5 - 0.25 + 1
  Run searched = troupe("search --model dnn --data csv:" + d +
                        "/train.csv --label kind,size --grid \"learning_rate=0.01,0.03\"");
  CHECK(searched.status == 2);
  CHECK(searched.err.find("troupe search scores one label column") != std::string::npos);
  Run trees = troupe("train --model boosted_trees" + data + " --label kind,size --model-dir " + d +
                     "/trees");
  CHECK(trees.status == 2);
  CHECK(trees.err.find("a head per label trains with --model dnn, linear or wide_deep") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe train on a table with text columns: inferred, from a spec, wide & deep") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_text_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // The label is whether two text columns agree: an interaction of the two.
  const char* colors[] = {"red", "green", "blue"};
  std::mt19937 rng(5);
  std::normal_distribution<double> g(0, 1);
  for (const auto& [name, rows] :
       {std::pair<const char*, int>{"train.csv", 600}, {"test.csv", 200}}) {
    std::ofstream f(dir / name);
    f << "a,noise,b,label\n";
    for (int i = 0; i < rows; ++i) {
      const char* a = colors[rng() % 3];
      const char* b = i % 2 ? a : colors[rng() % 3];
      f << a << "," << g(rng) << "," << b << "," << (std::string(a) == b) << "\n";
    }
  }
  const std::string data = " --data csv:" + (dir / "train.csv").string() +
                           " --eval-data csv:" + (dir / "test.csv").string() + " --label label";
  auto accuracy_of = [](const std::string& out) {
    return out.rfind("{\"accuracy\": ", 0) == 0 ? std::stod(out.substr(13)) : -1.0;
  };
  auto info = [&](const char* model) {
    std::ifstream f(dir / model / "troupe_model.txt");
    return std::string((std::istreambuf_iterator<char>(f)), {});
  };
  Run wd = troupe("train --model wide_deep" + data + " --model-dir " + (dir / "wd").string());
  REQUIRE_MESSAGE(wd.status == 0, wd.err);
  CHECK(accuracy_of(wd.out) >= 0.97);
  CHECK(info("wd").find("wide_column crossed a,b buckets=") != std::string::npos);
  CHECK(info("wd").find("column numeric noise mean=") != std::string::npos);
  Run dnn = troupe("train --model dnn" + data + " --model-dir " + (dir / "dnn").string());
  REQUIRE_MESSAGE(dnn.status == 0, dnn.err);
  CHECK(info("dnn").find(" indicator\n") != std::string::npos);
  CHECK(accuracy_of(dnn.out) >= 0.97);
  // Without the cross a linear model cannot express agreement.
  Run lin = troupe("train --model linear" + data + " --model-dir " + (dir / "lin").string());
  REQUIRE_MESSAGE(lin.status == 0, lin.err);
  CHECK(accuracy_of(lin.out) < 0.8);
  CHECK(info("lin").find("column vocabulary a values=") != std::string::npos);

  // A spec file gives the cross to the linear model; evaluate and predict rebuild it, and an
  // unseen color goes to the out-of-vocabulary bucket.
  {
    std::ofstream spec(dir / "columns.txt");
    spec << "# the interaction, spelled out\n"
         << "vocabulary a values=red,green,blue oov=1\n"
         << "vocabulary b values=red,green,blue oov=1\n"
         << "crossed a,b buckets=100\n";
    std::ofstream unseen(dir / "unseen.csv");
    unseen << "a,noise,b,label\npurple,0.5,red,0\nred,0,red,1\n";
  }
  const std::string crossed = (dir / "crossed").string();
  Run spec = troupe("train --model linear --columns " + (dir / "columns.txt").string() + data +
                    " --model-dir " + crossed);
  REQUIRE_MESSAGE(spec.status == 0, spec.err);
  CHECK(accuracy_of(spec.out) >= 0.97);
  Run eval = troupe("evaluate --model-dir " + crossed +
                    " --data csv:" + (dir / "test.csv").string() + " --label label");
  REQUIRE_MESSAGE(eval.status == 0, eval.err);
  CHECK(accuracy_of(eval.out) == accuracy_of(spec.out));
  Run pred = troupe("predict --model-dir " + crossed +
                    " --data csv:" + (dir / "unseen.csv").string() + " --label label");
  REQUIRE_MESSAGE(pred.status == 0, pred.err);
  CHECK(lines(pred.out) == 3);                        // a header and a line per row
  CHECK(pred.out.find("\n1,") != std::string::npos);  // red and red agree

  // Text labels name the classes; a weight column weighs the examples and is no feature.
  {
    std::ofstream named(dir / "named.csv");
    named << "a,b,w,label\n";
    for (int i = 0; i < 600; ++i) {
      const char* a = colors[rng() % 3];
      const char* b = i % 2 ? a : colors[rng() % 3];
      named << a << "," << b << "," << 1 + i % 3 << "," << (std::string(a) == b ? "same" : "differ")
            << "\n";
    }
  }
  const std::string named = (dir / "named").string();
  Run text = troupe("train --model dnn --data csv:" + (dir / "named.csv").string() +
                    " --label label --weight-column w --model-dir " + named);
  REQUIRE_MESSAGE(text.status == 0, text.err);
  CHECK(accuracy_of(text.out) >= 0.97);
  CHECK(info("named").find("param label_vocabulary differ,same\n") != std::string::npos);
  CHECK(info("named").find("column numeric w") == std::string::npos);
  Run names = troupe("predict --model-dir " + named +
                     " --data csv:" + (dir / "named.csv").string() + " --label label");
  REQUIRE_MESSAGE(names.status == 0, names.err);
  CHECK((names.out.find("\nsame,") != std::string::npos &&
         names.out.find("\ndiffer,") != std::string::npos));

  // troupe search over the same table: each text column one indicator column a value (a, b: 3
  // each, and w), the text label as classes; agreement needs hidden units.
  Run search = troupe("search --model dnn --data csv:" + (dir / "named.csv").string() +
                      " --label label --grid \"hidden=1;32,16\" --cv 3");
  REQUIRE_MESSAGE(search.status == 0, search.err);
  CHECK(search.err.find("on 600 examples of 7 columns") != std::string::npos);
  const std::string best = "best: hidden_units=32,16 (mean_test_score ";
  const size_t at = search.out.find(best);
  REQUIRE_MESSAGE(at != std::string::npos, search.out);
  CHECK(std::stod(search.out.substr(at + best.size())) >= 0.95);

  // An identifier column (a value a row) is hashed, not listed.
  {
    std::ofstream ids(dir / "ids.csv");
    ids << "id,x,label\n";
    for (int i = 0; i < 10050; ++i) ids << "u" << i << "," << g(rng) << "," << i % 2 << "\n";
  }
  Run hashed = troupe("train --model linear --steps 20 --data csv:" + (dir / "ids.csv").string() +
                      " --label label --model-dir " + (dir / "ids").string());
  REQUIRE_MESSAGE(hashed.status == 0, hashed.err);
  CHECK(info("ids").find("column hash id buckets=20100\n") != std::string::npos);

  {
    std::ofstream bad(dir / "bad.txt");
    bad << "vocabulary a values=red\nembeding b buckets=3\n";
  }
  Run refused = troupe("train --model linear --columns " + (dir / "bad.txt").string() + data +
                       " --model-dir " + (dir / "bad").string());
  CHECK(refused.status != 0);
  CHECK(refused.err.find("bad.txt:2") != std::string::npos);
  CHECK(refused.err.find("'embeding'") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "troupe train --model boosted_trees|random_forest: text and numeric columns, regression") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("troupe_cli_trees_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // The class: whether two colors agree, unless x is above 1 (a threshold trees find).
  const char* colors[] = {"red", "green", "blue"};
  std::mt19937 rng(9);
  std::normal_distribution<double> g(0, 1);
  // The value: 10 above x = 0, 5 more when the colors agree.
  for (const auto& [name, rows] : {std::pair<const char*, int>{"train", 800}, {"test", 300}}) {
    std::ofstream classes(dir / (std::string(name) + ".csv"));
    std::ofstream values(dir / (std::string(name) + "_values.csv"));
    classes << "a,x,b,label\n";
    values << "a,x,b,value\n";
    for (int i = 0; i < rows; ++i) {
      const char* a = colors[rng() % 3];
      const char* b = i % 2 ? a : colors[rng() % 3];
      const double x = g(rng);
      const bool agree = std::string(a) == b;
      classes << a << "," << x << "," << b << "," << (x > 1 || agree ? "yes" : "no") << "\n";
      values << a << "," << x << "," << b << "," << 10 * (x > 0) + 5 * agree << "\n";
    }
  }
  auto data = [&](const std::string& suffix) {
    return " --data csv:" + (dir / ("train" + suffix + ".csv")).string() +
           " --eval-data csv:" + (dir / ("test" + suffix + ".csv")).string();
  };
  auto metric_of = [](const std::string& out, const std::string& name) {
    const size_t at = out.find("\"" + name + "\": ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + name.size() + 4));
  };
  for (const char* model : {"boosted_trees", "random_forest"}) {
    const std::string name = model;
    CAPTURE(name);
    const std::string model_dir = (dir / model).string();
    Run trained = troupe(std::string("train --model ") + model + data("") +
                         " --label label --n-trees 30 --model-dir " + model_dir);
    REQUIRE_MESSAGE(trained.status == 0, trained.err);
    CHECK(metric_of(trained.out, "accuracy") >= 0.97);
    Run eval = troupe("evaluate --model-dir " + model_dir +
                      " --data csv:" + (dir / "test.csv").string() + " --label label");
    REQUIRE_MESSAGE(eval.status == 0, eval.err);
    CHECK(metric_of(eval.out, "accuracy") == metric_of(trained.out, "accuracy"));
    Run pred = troupe("predict --model-dir " + model_dir +
                      " --data csv:" + (dir / "test.csv").string() + " --label label");
    REQUIRE_MESSAGE(pred.status == 0, pred.err);
    CHECK((pred.out.find("\nyes,") != std::string::npos &&
           pred.out.find("\nno,") != std::string::npos));
    Run values = troupe(std::string("train --model ") + model + " --regression" + data("_values") +
                        " --label value --n-trees 30 --model-dir " + model_dir + "_values");
    REQUIRE_MESSAGE(values.status == 0, values.err);
    // The target's deviation is about 5.5; a forest, whose nodes each see a third of the
    // features, finds the interaction less sharply than boosting.
    CHECK(metric_of(values.out, "rmse") < (name == "random_forest" ? 2.0 : 1.0));
  }
  // XOR of two thresholds: a search finds that stumps (depth 1) cannot learn it.
  {
    std::ofstream f(dir / "xor.csv");
    std::uniform_real_distribution<double> u(0, 1);
    f << "p,q,label\n";
    for (int i = 0; i < 400; ++i) {
      const double p = u(rng), q = u(rng);
      f << p << "," << q << "," << ((p > 0.5) != (q > 0.3)) << "\n";
    }
  }
  Run search = troupe("search --model boosted_trees --data csv:" + (dir / "xor.csv").string() +
                      " --label label --cv 3 --grid \"max_depth=1,3 n_trees=10\"");
  REQUIRE_MESSAGE(search.status == 0, search.err);
  CHECK(search.out.find("best: max_depth=3 n_trees=10") != std::string::npos);
  std::filesystem::remove_all(dir);
}
