// troupe as a cluster, as a user runs it: the launcher's job of ps tasks, a chief and workers
// as processes on 127.0.0.1 with a job secret; async training reaching what one process
// reaches; Ctrl-C ending every process; a worker killed and started again; servers that refuse
// to start unsafe or unsure of their task. Every process started here is ended here.
#include <doctest/doctest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs a shell command line; stdout and stderr of the whole line are captured.
Run shell(const std::string& line) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string out = dir + "/troupe_cluster_out_" + std::to_string(::getpid());
  const std::string err = dir + "/troupe_cluster_err_" + std::to_string(::getpid());
  Run r;
  const int rc = std::system(("(" + line + ") >" + out + " 2>" + err).c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

const std::string kTroupe = TROUPE_CLI;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

double number_after(const std::string& s, const std::string& key) {
  const size_t at = s.find("\"" + key + "\": ");
  REQUIRE_MESSAGE(at != std::string::npos, key, " in ", s);
  return std::stod(s.substr(at + key.size() + 4));
}

// Processes whose command line holds `marker` (a test's own temporary directory).
int processes_with(const std::string& marker) {
  // "[/]tmp/..." matches the processes but not the shell that runs pgrep with it.
  Run r = shell("pgrep -f -c -- '[" + marker.substr(0, 1) + "]" + marker.substr(1) + "' || true");
  return std::atoi(r.out.c_str());
}

struct Data {
  std::filesystem::path dir;
  std::string train, test;
};

// Three classes, well apart, 1200 rows each for training and testing.
Data make_data(const std::string& name) {
  Data d;
  d.dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d.dir);
  std::filesystem::create_directories(d.dir);
  std::mt19937 rng(7);
  std::normal_distribution<double> g(0, 1);
  d.train = (d.dir / "train.csv").string();
  d.test = (d.dir / "test.csv").string();
  for (const std::string& path : {d.train, d.test}) {
    std::ofstream f(path);
    f << "a,b,label\n";
    for (int i = 0; i < 1200; ++i) {
      const int y = i % 3;
      f << g(rng) + 3 * y << "," << g(rng) - 2 * y << "," << y << "\n";
    }
  }
  return d;
}

// A job of a chief, a ps and a worker on 127.0.0.1 for tasks started by hand: its cluster file
// (the path returned) and a new secret. Ports from the kernel's ephemeral range are avoided:
// these are fixed per test and process, and rarely taken.
std::string write_job(const Data& d, int first_port, const std::string& secret, int workers = 1,
                      int ps = 1) {
  REQUIRE(shell(kTroupe + " secret " + secret).status == 0);
  const std::string spec = (d.dir / "cluster.json").string();
  const int base = first_port + (::getpid() % 2000) * 4;
  auto list = [](int from, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) {
      out += (i ? ", " : "") + std::string("\"127.0.0.1:") + std::to_string(from + i) + "\"";
    }
    return "[" + out + "]";
  };
  std::ofstream(spec) << "{\"chief\": " << list(base, 1) << ", \"ps\": " << list(base + 1, ps)
                      << ", \"worker\": " << list(base + 1 + ps, workers) << "}";
  return spec;
}

std::string train_flags(const Data& d, const std::string& model) {
  return " --data csv:" + d.train + " --label label --eval-data csv:" + d.test + " --model-dir " +
         model + " --hidden 16 --batch-size 32 --learning-rate 0.01 --seed 3";
}

// One task of the job `spec` (write_job) as started by hand: `troupe server` for the ps,
// `troupe train` with `train_args` for the chief and the workers.
std::string task_command(const std::string& spec, const std::string& secret, const std::string& job,
                         const std::string& train_args, int index = 0) {
  const std::string what = job == "ps" ? " server" : " train" + train_args;
  return kTroupe + what + " --cluster " + spec + " --job " + job + " --task " +
         std::to_string(index) + " --secret " + secret;
}

// A shell loop that waits until `condition` holds, for a minute at most, and no longer than
// process `pid` lives: a task that fails early must not leave the test's loop running.
std::string wait_until(const std::string& condition, const std::string& pid) {
  return "for i in $(seq 1200); do " + condition + " && break; kill -0 " + pid +
         " 2>/dev/null || break; sleep 0.05; done";
}

// The lines of `log` that start with `start`, in order.
std::vector<std::string> lines_starting(const std::string& log, const std::string& start) {
  std::vector<std::string> found;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(start, 0) == 0) found.push_back(line);
  }
  return found;
}

// Whether a line of `log` starts with `start` and holds `what`.
bool logged(const std::string& log, const std::string& start, const std::string& what) {
  const std::vector<std::string> lines = lines_starting(log, start);
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// The number after `start` on the first line of `log` that starts with it; -1 without one.
long long number_on_line(const std::string& log, const std::string& start) {
  const std::vector<std::string> lines = lines_starting(log, start);
  return lines.empty() ? -1 : std::atoll(lines.front().c_str() + start.size());
}

// Runs `launch`, a troupe cluster line, and interrupts it once the chief trains (its event file
// in `model` exists), as a user at a terminal would.
Run interrupted(const std::string& launch, const std::string& model) {
  return shell(launch + " & pid=$!; " +
               wait_until("ls " + model + "/events.out.tfevents.* >/dev/null 2>&1", "$pid") +
               "; sleep 0.5; kill -INT $pid; wait $pid");
}

}  // namespace

TEST_CASE("troupe cluster: 2 ps and 2 workers train async to the accuracy of one process") {
  const Data d = make_data("troupe_cluster_async");
  Run one = shell(kTroupe + " train" + train_flags(d, (d.dir / "one").string()) + " --epochs 20");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  Run job = shell(kTroupe + " cluster --ps 2 --workers 2 -- train" +
                  train_flags(d, (d.dir / "two").string()) + " --epochs 20 --eval-every 200");
  REQUIRE_MESSAGE(job.status == 0, job.err);
  // The chief's JSON line is the launcher's output; the others' lines carry their task.
  REQUIRE(count(job.out, "\n") == 1);
  const double alone = number_after(one.out, "accuracy");
  const double together = number_after(job.out, "accuracy");
  CHECK(alone > 0.9);
  CHECK(together > alone - 0.03);
  // 20 epochs of 1200 rows in batches of 32: both stop at global step 750 (a step or two more
  // in flight), and the worker did part of them.
  CHECK(number_after(job.out, "global_step") >= 750);
  CHECK(number_after(job.out, "global_step") <= 756);
  const size_t worker = job.err.find("[worker 0] {\"global_step\"");
  REQUIRE_MESSAGE(worker != std::string::npos, job.err);
  // Its own steps, not the global ones: the chief ran the rest.
  CHECK(number_after(job.err.substr(worker), "steps") > 10);
  CHECK(number_after(job.err.substr(worker), "steps") < number_after(job.out, "global_step") - 10);
  CHECK(job.err.find("[ps 1] INFO: serving /job:ps/task:1 on 127.0.0.1:") != std::string::npos);
  CHECK(job.err.find("job secret required") != std::string::npos);
  // Only the chief saved checkpoints.
  CHECK(std::filesystem::exists(d.dir / "two" / "checkpoint"));
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster: wide & deep over text columns, their lookups run on the ps tasks") {
  // label = (color is red or blue) xor (shape is a star), or size > 8: the text columns'
  // weights and embeddings live on the ps tasks, where each step's gathers of them run.
  const Data d = make_data("troupe_cluster_wide_deep");
  std::mt19937 rng(5);
  const char* colors[] = {"red", "green", "blue", "black"};
  const char* shapes[] = {"circle", "square", "star"};
  for (const std::string& path : {d.train, d.test}) {
    std::ofstream f(path);
    f << "color,shape,size,label\n";
    for (int i = 0; i < 1500; ++i) {
      const std::string color = colors[rng() % 4], shape = shapes[rng() % 3];
      const double size = (rng() % 1000) / 100.0;
      const bool y = ((color == "red" || color == "blue") != (shape == "star")) || size > 8;
      f << color << "," << shape << "," << size << "," << y << "\n";
    }
  }
  Run job = shell(kTroupe + " cluster --ps 2 --workers 2 -- train --model wide_deep --data csv:" +
                  d.train + " --label label --eval-data csv:" + d.test + " --model-dir " +
                  (d.dir / "model").string() + " --epochs 4 --seed 3");
  REQUIRE_MESSAGE(job.status == 0, job.err);
  CHECK(number_after(job.out, "accuracy") > 0.95);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster --sync --pin: one global step a round of both replicas, as accurate") {
  const Data d = make_data("troupe_cluster_sync");
  Run job = shell(kTroupe + " cluster --ps 2 --workers 2 --pin -- train" +
                  train_flags(d, (d.dir / "sync").string()) + " --epochs 20 --sync");
  REQUIRE_MESSAGE(job.status == 0, job.err);
  CHECK(number_after(job.out, "accuracy") > 0.9);
  // 20 epochs of 1200 rows, 2 batches of 32 a step: 375 steps, and the worker took part in
  // every one of them (it joins before the first round can close).
  CHECK(number_after(job.out, "global_step") >= 375);
  CHECK(number_after(job.out, "global_step") <= 377);
  const size_t worker = job.err.find("[worker 0] {\"global_step\"");
  REQUIRE_MESSAGE(worker != std::string::npos, job.err);
  CHECK(number_after(job.err.substr(worker), "steps") >= 370);
  // Each replica on a core of its own (the ps tasks on what is left: all cores when none is).
  auto core_of = [&](const std::string& task) {
    const std::string line = "INFO: [cluster] " + task + " runs on core ";
    const size_t at = job.err.find(line);
    REQUIRE_MESSAGE(at != std::string::npos, line, " in ", job.err);
    return std::stoi(job.err.substr(at + line.size()));
  };
  CHECK(core_of("chief 0") != core_of("worker 0"));
  CHECK(job.err.find("INFO: [cluster] ps 1 runs on core") != std::string::npos);
  // And the ps tasks run each replica's calls on that replica's core.
  CHECK(job.err.find("[ps 1] INFO: serving /job:ps/task:1") != std::string::npos);
  CHECK(job.err.find("calls on their peers' cores)") != std::string::npos);
  // Replicas that fill the cores yield them to the ps tasks, which every replica waits for.
  cpu_set_t cores;
  REQUIRE(::sched_getaffinity(0, sizeof cores, &cores) == 0);
  const bool crowded = CPU_COUNT(&cores) <= 2;
  CHECK((job.err.find("they run at nice 10") != std::string::npos) == crowded);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster --sync --replicas-to-aggregate 1: a round is one replica's batch") {
  const Data d = make_data("troupe_cluster_backup");
  Run job = shell(kTroupe + " cluster --ps 1 --workers 2 -- train" +
                  train_flags(d, (d.dir / "backup").string()) +
                  " --epochs 10 --sync --replicas-to-aggregate 1 --sync-timeout 5");
  REQUIRE_MESSAGE(job.status == 0, job.err);
  CHECK(number_after(job.out, "accuracy") > 0.9);
  // 10 epochs of 1200 rows, one batch of 32 a step: 375 steps.
  CHECK(number_after(job.out, "global_step") >= 375);
  CHECK(number_after(job.out, "global_step") <= 377);
  CHECK(job.err.find("the replicas stop at global step 375") != std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster --sync with 33 workers: the ps serves every replica's data channels") {
  // 33 training replicas (the chief counted) with two data channels each to the ps: beyond the
  // 64 connections a ps once took at most, which refused some replicas' calls, failed their
  // steps and stalled the rounds. No more of them: under ASan each process takes about 350 MB.
  const Data d = make_data("troupe_cluster_many");
  Run job =
      shell(kTroupe + " cluster --ps 1 --workers 33 -- train --model linear --data csv:" + d.train +
            " --label label --model-dir " + (d.dir / "many").string() +
            " --sync --replicas-to-aggregate 30 --steps 5 --sync-timeout 20");
  REQUIRE_MESSAGE(job.status == 0, job.err);
  CHECK(number_after(job.out, "global_step") >= 5);
  CHECK_MESSAGE(job.err.find("refused") == std::string::npos, job.err);
  CHECK(job.err.find("training failed") == std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

// Under a sanitizer each troupe process takes about 350 MB: 66 of them fill a 24 GB machine.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

namespace {

// 2 ps, the chief and 63 workers (64 training replicas) started by hand, training to global step
// `last` (asynchronously; `extra` flags make it otherwise); once all 64 train, workers 3, 17, 40
// and 58 are killed, and once the chief has seen them go, workers 3 and 17 start again. Returns the
// chief's run (its log in d.dir/chief.log, each worker's status in d.dir/w<i>.rc). Each process
// runs under `timeout`, so that none outlives a failed test; a kill is of its troupe (the child of
// its timeout).
Run sixty_four(const Data& d, int last, const std::string& extra = "") {
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 33000, secret, 63, 2);
  const std::string dir = d.dir.string() + "/";
  const std::string flags = " --model linear --data csv:" + d.train + " --label label" +
                            " --model-dir " + dir + "model --steps " + std::to_string(last) + extra;
  auto task = [&](const std::string& job, const std::string& index) {
    return "timeout 300 " + kTroupe + (job == "ps" ? " server" : " train" + flags) + " --cluster " +
           spec + " --job " + job + " --task " + index + " --secret " + secret;
  };
  auto worker = [&](const std::string& i) {
    return task("worker", i) + " >/dev/null 2>" + dir + "w" + i + ".log & echo $! >" + dir + "w" +
           i + ".pid; ";
  };
  const std::string chief_log = dir + "chief.log";
  return shell(task("ps", "0") + " 2>" + dir + "ps0.log & " + task("ps", "1") + " 2>" + dir +
               "ps1.log & " + task("chief", "0") + " 2>" + chief_log +
               " & c=$!; for i in $(seq 0 62); do " + worker("$i") + "done; " +
               wait_until("grep -q '64 replicas train' " + chief_log, "$c") +
               "; for i in 3 17 40 58; do pkill -KILL -P $(cat " + dir + "w$i.pid); done; " +
               wait_until("grep -q '60 replicas train' " + chief_log, "$c") + "; " + worker("3") +
               worker("17") + wait_until("grep -q '62 replicas train' " + chief_log, "$c") +
               "; wait $c; status=$?; for i in $(seq 0 62); do wait $(cat " + dir +
               "w$i.pid); echo $? >" + dir + "w$i.rc; done; wait; exit $status");
}

// What sixty_four's chief logged of who left and joined, and the workers' statuses.
void check_sixty_four(const Data& d, const Run& r, int last) {
  const std::string chief = slurp((d.dir / "chief.log").string());
  REQUIRE_MESSAGE(r.status == 0, chief, slurp((d.dir / "ps0.log").string()));
  CHECK(number_after(r.out, "global_step") >= last);
  CHECK(logged(chief, "INFO: [chief 0] cluster: ", "64 replicas train (chief, workers 0-62)"));
  CHECK_MESSAGE(logged(chief, "INFO: [chief 0] cluster: ",
                       "60 replicas train (chief, workers 0-2, 4-16, 18-39, 41-57, 59-62)"),
                chief);
  CHECK(logged(
      chief, "INFO: [chief 0] cluster: ", "62 replicas train (chief, workers 0-39, 41-57, 59-62)"));
  for (int i = 0; i < 63; ++i) {
    const int status =
        std::atoi(slurp((d.dir / ("w" + std::to_string(i) + ".rc")).string()).c_str());
    const bool killed = i == 40 || i == 58;  // 3 and 17 were started again
    CHECK_MESSAGE(status == (killed ? 128 + SIGKILL : 0), "worker ", i, ": ",
                  slurp((d.dir / ("w" + std::to_string(i) + ".log")).string()));
  }
  CHECK(processes_with(d.dir.string()) == 0);
}

}  // namespace

TEST_CASE("64 workers, asynchronous: 4 killed and 2 started again, the job ends" *
          doctest::skip(kSanitized)) {
  const Data d = make_data("troupe_cluster_64_async");
  const Run r = sixty_four(d, 40000);
  check_sixty_four(d, r, 40000);
  std::filesystem::remove_all(d.dir);
}

// Synchronous, rounds of 60: a round never waits for its timeout (120 s here), neither for the
// killed workers (their connections closed) nor for replicas of another step (each update
// carries the global step its step read: every shard counts the same step's updates in a round).
TEST_CASE("64 workers, synchronous in rounds of 60: 4 killed and 2 started again, none waited for" *
          doctest::skip(kSanitized)) {
  const Data d = make_data("troupe_cluster_64_sync");
  const Run r = sixty_four(d, 300, " --sync --replicas-to-aggregate 60 --sync-timeout 120");
  check_sixty_four(d, r, 300);
  const std::string chief = slurp((d.dir / "chief.log").string());
  CHECK(logged(chief, "INFO: [chief 0] cluster: ", "rounds aggregate 60"));
  for (const char* ps : {"ps0.log", "ps1.log"}) {
    const std::string log = slurp((d.dir / ps).string());
    CHECK_MESSAGE(log.find("closed after") == std::string::npos, ps, ": ", log);
    CHECK_MESSAGE(log.find("left (its connections closed)") != std::string::npos, ps, ": ", log);
  }
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster: boosted trees grow on the ps from every worker's batches") {
  const Data d = make_data("troupe_cluster_trees");
  Run job = shell(kTroupe + " cluster --ps 1 --workers 2 -- train --model boosted_trees" +
                  " --n-trees 100 --max-depth 3 --batch-size 300 --data csv:" + d.train +
                  " --label label --eval-data csv:" + d.test + " --model-dir " +
                  (d.dir / "trees").string());
  REQUIRE_MESSAGE(job.status == 0, job.err);
  CHECK(number_after(job.out, "accuracy") > 0.9);
  // A round a step: 100 rounds and the bias, then a step or two more in flight from each
  // replica, which find the trees grown and change nothing. Enough steps that a worker that
  // starts a little late (a loaded machine) still grows some of them.
  CHECK(number_after(job.out, "global_step") <= 101 + 6);
  const size_t worker = job.err.find("[worker 0] {\"global_step\"");
  REQUIRE_MESSAGE(worker != std::string::npos, job.err);
  CHECK(number_after(job.err.substr(worker), "steps") > 0);
  Run sync =
      shell(kTroupe + " cluster --ps 1 --workers 2 -- train --model boosted_trees --sync" +
            " --data csv:" + d.train + " --label label --model-dir " + (d.dir / "sync").string());
  CHECK(sync.status != 0);
  CHECK(sync.err.find("grows its trees from each batch in turn") != std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster: Ctrl-C stops the chief gracefully and leaves no process behind") {
  const Data d = make_data("troupe_cluster_int");
  const std::string model = (d.dir / "model").string();
  const std::string launch = kTroupe + " cluster --ps 1 --workers 2 --evaluator -- train" +
                             train_flags(d, model) + " --epochs 100000";
  Run r = interrupted(launch, model);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("interrupted: stopping the chief") != std::string::npos);
  REQUIRE(count(r.out, "\n") == 1);
  CHECK(number_after(r.out, "global_step") > 0);
  CHECK(r.err.find("killing them") == std::string::npos);  // all ended when asked
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe cluster --sync: Ctrl-C ends the worker too, which does not wait for its round") {
  const Data d = make_data("troupe_cluster_sync_int");
  const std::string model = (d.dir / "model").string();
  // The worker's last round never fills once the chief has stopped; waiting it out (60 s)
  // would outlast the launcher's grace (10 s), which kills what is still running.
  const std::string launch = kTroupe + " cluster --ps 1 --workers 2 --grace 10 -- train" +
                             train_flags(d, model) + " --epochs 100000 --sync --sync-timeout 60";
  Run r = interrupted(launch, model);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(number_after(r.out, "global_step") > 0);
  // It ended as asked: no failed step, no restart, no kill.
  CHECK_MESSAGE(r.err.find("[worker 0] {\"global_step\"") != std::string::npos, r.err);
  CHECK(r.err.find("\"restarts\": 0}") != std::string::npos);
  CHECK_MESSAGE(r.err.find("WARNING") == std::string::npos, r.err);
  CHECK(r.err.find("killing them") == std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE(
    "a worker killed with SIGKILL: the chief trains on, and the worker started again rejoins") {
  const Data d = make_data("troupe_cluster_kill");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 21000, secret);
  auto task = [&](const std::string& job, int steps) {
    return task_command(spec, secret, job,
                        train_flags(d, model) + " --steps " + std::to_string(steps));
  };
  const std::string log = (d.dir / "worker.log").string();
  // The ps and a worker in the background, the worker killed once it has logged a step and
  // started again at once, the chief in the foreground: the worker must find the model where it
  // is and train on with the chief. The ps ends by itself once the chief has finished.
  Run r = shell(task("ps", 0) + " 2>" + (d.dir / "ps.log").string() + " & ps=$!; " +
                task("worker", 3000) + " >/dev/null 2>" + log + " & w=$!; " + "(" +
                wait_until("grep -q 'step = ' " + log, "$w") + "; kill -KILL $w; wait $w; " +
                task("worker", 3000) + " >" + (d.dir / "again.json").string() + " 2>>" + log +
                ") & again=$!; " + task("chief", 3000) +
                "; status=$?; wait $again; wait $ps; exit $status");
  REQUIRE_MESSAGE(r.status == 0, r.err, "\n", slurp(log));
  CHECK(number_after(r.out, "global_step") >= 3000);
  const std::string again = slurp((d.dir / "again.json").string());
  CHECK_MESSAGE(number_after(again, "global_step") >= 3000, again, slurp(log));
  CHECK(number_after(again, "steps") > 0);
  const std::string ps_log = slurp((d.dir / "ps.log").string());
  CHECK(ps_log.find("the chief has finished training") != std::string::npos);
  // Its last line says what it served: each step of the chief and the worker (in its two lives,
  // one replica) sent the ps its updates in one call.
  const size_t served = ps_log.find(" served ");
  REQUIRE_MESSAGE(served != std::string::npos, ps_log);
  CHECK(std::stod(ps_log.substr(served + 8)) >= 3000);
  CHECK_MESSAGE(ps_log.find(" updates from 2 replicas in ", served) != std::string::npos, ps_log);
  CHECK(ps_log.find(" s of CPU (", served) != std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("sync: a killed worker is not waited for, and started again it rejoins the rounds") {
  // A round's timeout of two minutes: a round that waited for the killed worker would show.
  const Data d = make_data("troupe_cluster_sync_kill");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 29000, secret);
  auto task = [&](const std::string& job) {
    return task_command(spec, secret, job,
                        train_flags(d, model) + " --steps 100000 --sync --sync-timeout 120");
  };
  const std::string log = (d.dir / "worker.log").string(), ps_log = (d.dir / "ps.log").string(),
                    again = (d.dir / "again.log").string(),
                    chief_log = (d.dir / "chief.log").string();
  // The worker killed once it has logged a step; started again once the chief saw it leave;
  // the chief stopped (Ctrl-C) once it saw it join, and the rest (they would train on alone).
  Run r = shell(task("ps") + " 2>" + ps_log + " & ps=$!; " + task("worker") + " >/dev/null 2>" +
                log + " & w=$!; " + task("chief") + " 2>" + chief_log + " & c=$!; " +
                wait_until("grep -q 'step = ' " + log, "$w") + "; kill -KILL $w; " +
                wait_until("grep -q 'worker 0 left' " + chief_log, "$c") + "; " + task("worker") +
                " >/dev/null 2>" + again + " & w2=$!; " +
                wait_until("grep -q 'worker 0 joined' " + chief_log, "$c") + "; " +
                wait_until("grep -q 'step = ' " + again, "$c") +
                "; kill -INT $c; wait $c; status=$?; kill -TERM $w2 $ps; wait $w2 $ps; "
                "exit $status");
  const std::string ps = slurp(ps_log), chief = slurp(chief_log);
  REQUIRE_MESSAGE(r.status == 0, chief, "\n", ps);
  CHECK_MESSAGE(ps.find("replica 1 left (its connections closed)") != std::string::npos, ps);
  CHECK_MESSAGE(ps.find("closed after") == std::string::npos, ps);  // no round timed out
  CHECK(ps.find("replica 1 is back") != std::string::npos);
  // The chief's log: who trains, who left and who came back, and the rounds' size each time.
  CHECK_MESSAGE(chief.find("cluster: 2 replicas train (chief, worker 0); rounds aggregate 2") !=
                    std::string::npos,
                chief);
  CHECK(chief.find("cluster: worker 0 left; 1 replica trains (chief); rounds aggregate 1") !=
        std::string::npos);
  CHECK(chief.find("cluster: worker 0 joined; 2 replicas train (chief, worker 0); rounds "
                   "aggregate 2") != std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("elastic sync (--min-replicas 2 --max-replicas 3): rounds follow the live workers") {
  const Data d = make_data("troupe_cluster_elastic");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 31000, secret, 2);
  auto task = [&](const std::string& job, int index) {
    return task_command(spec, secret, job,
                        train_flags(d, model) +
                            " --steps 100000 --min-replicas 2 --max-replicas 3 --sync-timeout 120",
                        index);
  };
  const std::string dir = d.dir.string() + "/";
  // The chief and worker 0 start; worker 1 joins once they train; worker 0 is killed once the
  // chief has seen worker 1 join; the chief is stopped once it has seen worker 0 leave.
  Run r = shell(
      task("ps", 0) + " 2>" + dir + "ps.log & ps=$!; " + task("chief", 0) + " 2>" + dir +
      "chief.log & c=$!; " + task("worker", 0) + " >/dev/null 2>" + dir + "w0.log & w0=$!; " +
      wait_until("grep -q 'rounds aggregate 2' " + dir + "chief.log", "$c") + "; " +
      task("worker", 1) + " >/dev/null 2>" + dir + "w1.log & w1=$!; " +
      wait_until("grep -q 'worker 1 joined' " + dir + "chief.log", "$c") + "; kill -KILL $w0; " +
      wait_until("grep -q 'worker 0 left' " + dir + "chief.log", "$c") +
      "; sleep 0.5; kill -INT $c; wait $c; status=$?; kill -TERM $w1 $ps; wait $w1 $ps; "
      "exit $status");
  const std::string ps = slurp(dir + "ps.log"), chief = slurp(dir + "chief.log");
  REQUIRE_MESSAGE(r.status == 0, chief, "\n", ps);
  const std::string sizes = " (--min-replicas 2, at most 3)";
  CHECK_MESSAGE(chief.find("cluster: 2 replicas train (chief, worker 0); rounds aggregate 2" +
                           sizes) != std::string::npos,
                chief);
  CHECK(chief.find("cluster: worker 1 joined; 3 replicas train (chief, workers 0-1); rounds "
                   "aggregate 3" +
                   sizes) != std::string::npos);
  CHECK(chief.find("cluster: worker 0 left; 2 replicas train (chief, worker 1); rounds "
                   "aggregate 2" +
                   sizes) != std::string::npos);
  CHECK_MESSAGE(ps.find("closed after") == std::string::npos, ps);  // no round timed out
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("a ps killed and started again: the chief restores it from its checkpoint, all go on") {
  const Data d = make_data("troupe_cluster_ps");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 25000, secret);
  const std::string common =
      " --cluster " + spec + " --task 0 --secret " + secret + " 2>>" + (d.dir / "log").string();
  const std::string ps = kTroupe + " server --job ps" + common;
  const std::string train =
      kTroupe + " train" + train_flags(d, model) + " --steps 4000 --eval-every 500";
  // The ps dies (SIGKILL) once the chief has saved a checkpoint, and comes back a little later.
  Run r =
      shell(ps + " & p=$!; " + train + " --job worker" + common + " >" +
            (d.dir / "worker.json").string() + " & w=$!; (" +
            wait_until("ls " + model + "/model.ckpt-* >/dev/null 2>&1", "$p") +
            "; kill -KILL $p; sleep 0.8; " + ps + " & echo $! >" + (d.dir / "ps2.pid").string() +
            ") & " + train + " --job chief" + common + "; status=$?; wait $w; p2=$(cat " +
            (d.dir / "ps2.pid").string() +
            "); kill -TERM $p2; while kill -0 $p2 2>/dev/null; do sleep 0.05; done; exit $status");
  const std::string log = slurp((d.dir / "log").string());
  REQUIRE_MESSAGE(r.status == 0, log);
  CHECK(number_after(r.out, "global_step") >= 4000);
  CHECK(number_after(r.out, "restarts") >= 1);
  CHECK(number_after(r.out, "accuracy") > 0.9);
  CHECK(log.find("[chief 0] restored") != std::string::npos);
  // The chief said the ps was lost, naming it: a step's call found it unreachable, or, between
  // two runs (its evaluations), its link gone. (The worker may say nothing: here the chief's
  // first 500 steps take milliseconds, and the worker may join only once the ps is back.)
  CHECK_MESSAGE(logged(log, "WARNING: [chief 0]", "/job:ps/task:0"), log);
  // A replica whose run failed with it names the step it had reached (it named 0 when it had
  // not asked the ps since it began: the step counts came with its steps' fetches), or says it
  // had done none (a worker that joined as the ps died: "at step 0" before, one run in ~20).
  for (const std::string who : {"[chief 0]", "[worker 0]"}) {
    const long long at = number_on_line(log, "WARNING: " + who + " training failed at step ");
    CHECK_MESSAGE(at != 0, log);
  }
  const std::string worker = slurp((d.dir / "worker.json").string());
  CHECK_MESSAGE(number_after(worker, "global_step") >= 4000, worker);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("the chief killed and started again trains on from the model the ps tasks hold") {
  const Data d = make_data("troupe_cluster_chief");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 27000, secret);
  const std::string log = (d.dir / "log").string();
  const std::string common = " --cluster " + spec + " --task 0 --secret " + secret + " 2>>" + log;
  const std::string train =
      kTroupe + " train" + train_flags(d, model) + " --steps 3000 --eval-every 500";
  // The chief dies (SIGKILL) after its first checkpoint; the same command again goes on.
  Run r = shell(kTroupe + " server --job ps" + common + " & p=$!; " + train + " --job worker" +
                common + " >/dev/null & w=$!; " + train + " --job chief" + common + " & c=$!; " +
                wait_until("ls " + model + "/model.ckpt-* >/dev/null 2>&1", "$c") +
                "; kill -KILL $c; wait $c; " + train + " --job chief" + common +
                "; status=$?; wait $w; kill -TERM $p; wait $p; exit $status");
  const std::string logged = slurp(log);
  REQUIRE_MESSAGE(r.status == 0, logged);
  CHECK(number_after(r.out, "global_step") >= 3000);
  CHECK(number_after(r.out, "accuracy") > 0.9);
  CHECK(logged.find("the ps tasks hold the model at global step") != std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

namespace {
// The text of the model directory's newest checkpoint file (variable names are in it as text).
std::string newest_checkpoint(const std::string& model) {
  long best = -1;
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(model)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("model.ckpt-", 0) != 0 || name.find('.', 11) != std::string::npos) continue;
    const long step = std::atol(name.c_str() + 11);
    if (step > best) best = step, path = e.path().string();
  }
  return path.empty() ? "" : slurp(path);
}
}  // namespace

TEST_CASE("a cluster resumes with another number of ps tasks; one process evaluates the model") {
  const Data d = make_data("troupe_cluster_parts");
  const std::string model = (d.dir / "model").string();
  // The second layer's 256 x 512 kernel (512 KB) is big enough to split over two ps tasks.
  const std::string flags = " --data csv:" + d.train + " --label label --eval-data csv:" + d.test +
                            " --model-dir " + model +
                            " --hidden 256,512 --batch-size 32 --learning-rate 0.01 --seed 3" +
                            " --eval-every 100";
  Run two = shell(kTroupe + " cluster --ps 2 --workers 1 -- train" + flags + " --steps 150");
  REQUIRE_MESSAGE(two.status == 0, two.err);
  const std::string parts = newest_checkpoint(model);
  CHECK(parts.find("dnn/hiddenlayer_1/kernel/part_1") != std::string::npos);
  // One ps now: the kernel whole, trained on from the two parts, Adam's slots with them.
  Run one = shell(kTroupe + " cluster --ps 1 --workers 1 -- train" + flags + " --steps 300");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  CHECK(one.err.find("[chief 0] INFO: restored") != std::string::npos);
  CHECK(number_after(one.out, "global_step") >= 300);
  CHECK(number_after(one.out, "accuracy") > 0.9);
  const std::string whole = newest_checkpoint(model);
  CHECK(whole.find("dnn/hiddenlayer_1/kernel") != std::string::npos);
  CHECK(whole.find("dnn/hiddenlayer_1/kernel/part_") == std::string::npos);
  Run alone = shell(kTroupe + " evaluate --model-dir " + model + " --data csv:" + d.test +
                    " --label label");
  REQUIRE_MESSAGE(alone.status == 0, alone.err);
  CHECK(number_after(alone.out, "accuracy") == doctest::Approx(number_after(one.out, "accuracy")));
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("a chief waiting for its ps, a worker for its chief: the first SIGTERM ends each wait") {
  const Data d = make_data("troupe_cluster_wait_stop");
  const std::string model = (d.dir / "model").string();
  const std::string secret = (d.dir / "job.secret").string();
  const std::string spec = write_job(d, 23000, secret);
  auto task = [&](const std::string& job) {
    return task_command(spec, secret, job, train_flags(d, model) + " --cluster-deadline 120");
  };
  // Each waiter is terminated once it says whom it waits for (logged every 5 s); it must end
  // within seconds of the signal, not at its deadline of two minutes.
  auto stopped_within = [&](const std::string& line, const std::string& log, const char* says) {
    const auto start = std::chrono::steady_clock::now();
    Run r = shell(line + " 2>" + log + " & p=$!; " +
                  wait_until("grep -q 'waiting for' " + log, "$p") + "; kill -TERM $p; wait $p");
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string err = slurp(log);
    CHECK_MESSAGE(r.status == 128 + SIGTERM, err);  // stopped by its launcher: restart it
    CHECK_MESSAGE(err.find(says) != std::string::npos, err);
    CHECK_MESSAGE(secs < 30, secs, " s: ", err);
  };
  stopped_within(task("chief"), (d.dir / "chief.log").string(),
                 "stopped while waiting for /job:ps/task:0 at 127.0.0.1:");
  Run ps = shell(task("ps") + " 2>/dev/null & echo $!");
  stopped_within(task("worker"), (d.dir / "worker.log").string(),
                 "stopped while waiting for the chief to initialise");
  kill(std::atoi(ps.out.c_str()), SIGTERM);
  for (int i = 0; i < 200 && processes_with(d.dir.string()) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("troupe server and cluster: unsafe or unclear starts are one line and exit 2") {
  const Data d = make_data("troupe_cluster_flags");
  const std::string spec = (d.dir / "cluster.json").string();
  std::ofstream(spec) << R"({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]})";
  struct Case {
    std::string args, says;
  };
  for (const Case& c : std::vector<Case>{
           {"server", "needs its cluster"},
           {"server --cluster " + spec + " --job ps --task 0", "needs the job secret"},
           {"server --cluster " + spec + " --job chief --task 0 --insecure", "hosts a ps task"},
           {"server --cluster " + spec + " --job ps", "--cluster needs --job TYPE and --task N"},
           {"server --cluster " + spec + " --job ps --task 5 --insecure", "not in the cluster"},
           {"cluster --ps 1 --workers 2", "the tasks' command comes after --"},
           {"cluster --ps 0 -- train", "--ps: '0'"},
           {"train --cluster " + spec +
                " --job chief --task 0 --data csv:x --label y"
                " --model-dir x --min-replicas 2 --replicas-to-aggregate 2",
            "give one or the other"},
           {"train --cluster " + spec +
                " --job chief --task 0 --data csv:x --label y"
                " --model-dir x --min-replicas 3 --max-replicas 2",
            "--max-replicas 2 is fewer than --min-replicas 3"},
           {"train --cluster " + spec +
                " --job chief --task 0 --data csv:x --label y"
                " --model-dir x --max-replicas 9",
            "more than the cluster's training replicas (1)"},
           {"cluster -- train --cluster x", "sets --cluster for each task itself"},
           {"server --cluster " + spec + " --job ps --task 0 --insecure --data-port 70000",
            "--data-port: '70000' is not a port"},
           {"server --cluster " + spec + " --job ps --task 0 --insecure --advertise-data-port x",
            "--advertise-data-port: 'x' is not a port"},
           {"server --cluster " + spec + " --job ps --task 0 --insecure --handshake-timeout 0",
            "--handshake-timeout: '0' is not a number of milliseconds"},
           {"train --cluster-resolver slurm --ps 1 --data fashion-mnist --model-dir x",
            "SLURM_PROCID is not set (run the task with srun)"},
           {"train --ps 2 --data fashion-mnist --model-dir x",
            "--ps goes with --cluster-resolver slurm or mpi"},
           {"server --cluster-resolver kubernetes", "'kubernetes' is not tf_config, slurm or mpi"},
           {"train --cluster-resolver mpi --data fashion-mnist --model-dir x",
            "no rank (OMPI_COMM_WORLD_RANK"},
       }) {
    Run r = shell(
        "TF_CONFIG= env -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u PMIX_RANK -u "
        "TROUPE_CLUSTER_RESOLVER " +
        kTroupe + " " + c.args);
    CHECK_MESSAGE(r.status == 2, c.args, ": ", r.err);
    CHECK_MESSAGE(count(r.err, "\n") == 1, c.args, ": ", r.err);
    CHECK_MESSAGE(r.err.find(c.says) != std::string::npos, c.args, ": ", r.err);
  }
  std::filesystem::remove_all(d.dir);
}

namespace {

// A job secret as Kubernetes mounts a Secret: `dir`/job.secret a link into ..data/, mode 0400.
void mount_secret(const std::string& dir, const std::string& secret) {
  std::filesystem::create_directories(dir + "/..2026_12_05_00_00_00.1");
  std::filesystem::copy_file(secret, dir + "/..2026_12_05_00_00_00.1/job.secret");
  ::chmod((dir + "/..2026_12_05_00_00_00.1/job.secret").c_str(), 0400);
  std::filesystem::create_directory_symlink("..2026_12_05_00_00_00.1", dir + "/..data");
  std::filesystem::create_symlink("..data/job.secret", dir + "/job.secret");
}

// Every replica of `manifest` (deploy/kubernetes), as its launcher would start it (the TF_CONFIG
// tests/deploy/operator_tf_config.py generates), on addresses of its own on the loopback network
// and one port; run to their end (two minutes at most). Each replica's output is in
// d.dir/<type>-<index>.{out,err,rc}; the replicas' names are returned.
std::vector<std::string> run_deployment(const Data& d, const std::string& kind,
                                        const std::string& manifest) {
  const std::string job = (d.dir / "job.secret").string(), reader = (d.dir / "reader").string();
  REQUIRE(shell(kTroupe + " secret " + job + " && " + kTroupe + " secret --reader " + job + " " +
                reader)
              .status == 0);
  mount_secret((d.dir / "secret").string(), job);
  mount_secret((d.dir / "reader-secret").string(), reader);
  const int port = 26000 + ::getpid() % 3000;
  Run replicas = shell("/usr/bin/python3 " TROUPE_DEPLOY_TESTS "/operator_tf_config.py " + kind +
                       " " TROUPE_SOURCE_DIR "/deploy/kubernetes/" + manifest + " --loopback " +
                       std::to_string(port) + " --mount /data=" + d.dir.string() +
                       " --mount /model=" + (d.dir / "model").string() +
                       " --mount /etc/troupe=" + (d.dir / "secret").string() +
                       " --mount evaluator:/etc/troupe=" + (d.dir / "reader-secret").string());
  REQUIRE_MESSAGE(replicas.status == 0, replicas.err);
  std::string line;
  std::vector<std::string> names;
  std::istringstream rows(replicas.out);
  for (std::string row; std::getline(rows, row);) {
    std::vector<std::string> cells;
    std::istringstream fields(row);
    for (std::string cell; std::getline(fields, cell, '\t');) cells.push_back(cell);
    REQUIRE(cells.size() == 4);
    const std::string name = cells[0] + "-" + cells[1], base = (d.dir / name).string();
    names.push_back(name);
    REQUIRE(cells[3].rfind("troupe ", 0) == 0);
    const std::string command = kTroupe + cells[3].substr(6);  // this build's troupe
    line += "(TF_CONFIG='" + cells[2] + "' timeout 120 " + command + " >" + base + ".out 2>" +
            base + ".err; echo $? >" + base + ".rc) & ";
  }
  shell(line + "wait");
  return names;
}

}  // namespace

TEST_CASE("a TFJob as Kubeflow's operator starts it: every replica one command, each ends") {
  const Data d = make_data("troupe_tfjob");
  const std::vector<std::string> names = run_deployment(d, "tfjob", "tfjob.yaml");
  CHECK(names ==
        std::vector<std::string>{"chief-0", "ps-0", "ps-1", "worker-0", "worker-1", "evaluator-0"});
  for (const std::string& name : names) {
    const std::string base = (d.dir / name).string();
    CHECK_MESSAGE(std::atoi(slurp(base + ".rc").c_str()) == 0, name, ": ", slurp(base + ".err"));
  }
  // The chief's JSON line; the ps tasks ended by themselves once it had finished; the evaluator
  // evaluated the last checkpoint with its reader's secret.
  const std::string chief = slurp((d.dir / "chief-0.out").string());
  CHECK(number_after(chief, "accuracy") > 0.9);
  for (const char* ps : {"ps-0.err", "ps-1.err"}) {
    CHECK(slurp((d.dir / ps).string()).find("the chief has finished training") !=
          std::string::npos);
  }
  const std::string evaluator = slurp((d.dir / "evaluator-0.out").string());
  // --epochs 10 of 1200 rows, 128 a step: the replicas stop at global step 94 (or a step or
  // two past it, being asynchronous), and the evaluator once it has evaluated one as late.
  CHECK(number_after(evaluator, "global_step") >= 94);
  CHECK(number_after(evaluator, "global_step") <= number_after(chief, "global_step"));
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("StatefulSets without a chief: worker 0 is the chief, and the job ends") {
  const Data d = make_data("troupe_statefulset");
  const std::vector<std::string> names = run_deployment(d, "statefulset", "statefulset.yaml");
  CHECK(names == std::vector<std::string>{"ps-0", "ps-1", "worker-0", "worker-1", "worker-2"});
  for (const std::string& name : names) {
    const std::string base = (d.dir / name).string();
    CHECK_MESSAGE(std::atoi(slurp(base + ".rc").c_str()) == 0, name, ": ", slurp(base + ".err"));
  }
  const std::string chief = slurp((d.dir / "worker-0.out").string());
  CHECK(number_after(chief, "accuracy") > 0.9);  // the chief's JSON line of the metrics
  CHECK(std::filesystem::exists(d.dir / "model" / "checkpoint"));
  CHECK(slurp((d.dir / "worker-1.out").string()).find("\"accuracy\"") == std::string::npos);
  CHECK(processes_with(d.dir.string()) == 0);
  std::filesystem::remove_all(d.dir);
}

TEST_CASE("exit statuses as the operators read them: 128 for what a restart may cure, SIGTERM's") {
  const Data d = make_data("troupe_cluster_exit");
  const std::string model = (d.dir / "model").string();
  const int port = 27000 + ::getpid() % 2000;
  // Its ps never comes: the deadline passes, status 128, and the log said why it waited.
  const std::string nobody = "{\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(port) +
                             "\"], \"ps\": [\"127.0.0.1:" + std::to_string(port + 1) +
                             "\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}";
  Run lost = shell("TF_CONFIG='" + nobody + "' " + kTroupe + " train" + train_flags(d, model) +
                   " --cluster-deadline 6");
  CHECK_MESSAGE(lost.status == 128, lost.err);
  CHECK_MESSAGE(lost.err.find("refused: nothing listens") != std::string::npos, lost.err);
  // A name that does not resolve (a pod not up yet) is told apart.
  const std::string unresolved =
      "{\"cluster\": {\"chief\": [\"127.0.0.1:1\"], \"ps\": "
      "[\"ps-0.troupe.invalid:2222\"]}, \"task\": {\"type\": "
      "\"chief\", \"index\": 0}}";
  Run dns = shell("TF_CONFIG='" + unresolved + "' " + kTroupe + " train" + train_flags(d, model) +
                  " --cluster-deadline 6");
  CHECK_MESSAGE(dns.status == 128, dns.err);
  CHECK_MESSAGE(
      dns.err.find("ps-0.troupe.invalid:2222: the name is not resolvable yet") != std::string::npos,
      dns.err);
  // Permanent: a bad flag (2), data that is not there (1).
  CHECK(shell(kTroupe + " train --epoch 3").status == 2);
  CHECK(
      shell(kTroupe + " train --data csv:/nonexistent.csv --label y --model-dir " + model).status ==
      1);
  // SIGTERM in training: a graceful stop (the checkpoint saved, the JSON line printed), then 143
  // so that the operator restarts it; Ctrl-C's own stop ends 0 (troupe_cli_test).
  Run term = shell(kTroupe + " train" + train_flags(d, model) + " --epochs 100000 & p=$!; " +
                   wait_until("ls " + model + "/events.out.tfevents.* >/dev/null 2>&1", "$p") +
                   "; sleep 0.5; kill -TERM $p; wait $p");
  CHECK_MESSAGE(term.status == 128 + SIGTERM, term.err);
  CHECK(term.err.find("INFO: terminated") != std::string::npos);
  CHECK(number_after(term.out, "global_step") > 0);
  CHECK(std::filesystem::exists(std::filesystem::path(model) / "checkpoint"));
  std::filesystem::remove_all(d.dir);
}
