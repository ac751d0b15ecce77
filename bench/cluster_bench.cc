// What going distributed costs and buys (the distributed issue's bars), measured by running the
// troupe command as a user would: the Fashion-MNIST DNN (256-128, batch 128, Adam), OpenBLAS at
// one thread in every process, one ps task.
//   async_scaling  cluster-wide examples/s with 2 training replicas against 2 x the rate with 1
//                  (bar >= 0.9), each replica with a core of its own and the ps beside them as
//                  both runs can have it: on a machine with a core beyond the replicas' (3 or
//                  more), on cores of its own in both runs; with fewer, on the replicas' cores
//                  in both (the 1-replica run confined to one core with taskset, as a ps in the
//                  workers' processes would be), so that 2 replicas have twice the cores of 1
//   sync_scaling   the same with --sync (bar >= 0.8)
//   async|sync_scaling_spare_core  on fewer than 3 cores, the same against a 1-replica run
//                  whose ps has the second core to itself, which the 2-replica run cannot have
//                  (the scaling runs are alternated, 3 pairs, and the median pair's ratio is
//                  the bar; --quick: one pair)
//   cluster_1_vs_process  1 replica + 1 ps against one process alone: the cost of the network
//   cpu_per_example_1|2  CPU seconds (user + system, every process of the job) per example
//                  trained, 1 or 2 replicas, against one process alone: what going distributed
//                  costs in work rather than time, which this machine's noise moves far less
//                  (the jobs' loading and final evaluation are in both)
//   bytes_per_step loopback bytes per global step against the floor, one gradient up and one
//                  value down per variable (2 x the model's bytes)
//   sparse_bytes_per_step  a 16 MB embedding in two parts on two ps tasks: bytes per step on
//                  the data channels against the floor, the ids and rows a step gathers and
//                  updates (the gathers run on the ps tasks: the table never travels)
//   ps_restart     seconds from a killed ps task's restart to the chief's first step logged
//                  after it (steps are logged every 100, a few tenths of a second here: an upper
//                  bound), against 2 s plus the restore (the restore: until the chief has sent
//                  the checkpoint to the new ps)
//   link_delay_1ms a replica's step time with 1 ms added each way on every link to its ps (a
//                  delaying proxy, delay_proxy.h, in front of the ps's CAF and data ports)
//                  against the same links through the proxy undelayed
//   link_delay_added  the time that adds to a step against two round trips (4 ms: a step's
//                  reads, then its updates, one after the other): below 1, communication
//                  overlaps computation or other communication
//   membership_churn  a job of a chief, a ps and a worker started, its ps killed and started
//                  again, then its worker: the seconds until each is back at work (summed),
//                  with 80 strangers on each of the ps's ports, reopened every 4.5 s
//                  (strangers.h), against the same without them (bar <= 1.5; runs alternated,
//                  the median pair's ratio; --only churn runs this bar alone)
// The replicas of the launched jobs are pinned to cores of their own (troupe cluster --pin); where
// they fill the machine's cores (2 on 2), the launcher runs them at nice 10 so that the ps,
// which every replica waits for, runs when a call comes.
// Rates are the medians of the chief's global_step/sec log lines (each over 100 steps); the
// machine's other load shows in them, so compare ratios from one run.
//
// With --workers N, these alone (the scaling issue's bench; scaling() says how):
//   scaling_async|sync_wN  examples/s of N replicas against N processes alone (bar: linear, 1)
//   ps_cpu_per_update_async|sync_wN  ps 0's CPU per replica step's updates against 1 replica's
//   model_async|sync_wN    the cluster model's efficiency for the run against the measured one
//   predicted_sync_dnn|dnn_x10_10g|25g_wN  the model's efficiency for N = 8 ... 64 workers on
//                  10 and 25 Gbit/s, beside TF 1.x's published figures where there are some
//
//   cluster_bench [--quick] [--json FILE] [--only churn] [--workers N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/job_secret.h"
#include "actors/session.h"
#include "bench/bench_flags.h"
#include "bench/bench_util.h"
#include "bench/cluster_model.h"
#include "bench/delay_proxy.h"
#include "bench/strangers.h"
#include "ops/math_ops.h"
#include "ops/random_ops.h"
#include "ops/sparse_ops.h"
#include "ops/state_ops.h"
#include "ops/training_ops.h"
#include "runtime/placement.h"

namespace {

bool quick = false;
constexpr double kBatch = 128;
// 784*256 + 256 + 256*128 + 128 + 128*10 + 10 floats.
constexpr double kModelBytes = 4.0 * (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

struct Run {
  int status = -1;
  std::string err;
  double steps_per_sec = 0;  // median of the logged rates
  double loopback_bytes = 0;
  double global_step = 0;
  double cpu_seconds = 0;                     // user + system of every process the command ran
  double ps_updates = 0, ps_cpu_seconds = 0;  // ps 0's own count at its end (run_ps)
};

// The cores this process may run on, as taskset numbers them.
std::vector<int> own_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cores.push_back(cpu);
  }
  return cores;
}

double children_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double loopback_bytes() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    double received = 0;
    fields >> received;
    return received;
  }
  return 0;
}

// `cores`: a taskset core list for the job, or "" for the bench's own.
Run run(const std::string& args, const std::string& cores = "") {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/cluster_bench_" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string err = dir + ".err", out = dir + ".out";
  const std::string cmd =
      "OPENBLAS_NUM_THREADS=1 " + (cores.empty() ? "" : "taskset -c " + cores + " ") +
      std::string(TROUPE_CLI) + " " + args + " --model-dir " + dir + " >" + out + " 2>" + err;
  Run r;
  const double before = loopback_bytes(), cpu_before = children_cpu_seconds();
  r.status = std::system(cmd.c_str());
  r.loopback_bytes = loopback_bytes() - before;
  r.cpu_seconds = children_cpu_seconds() - cpu_before;
  std::ifstream e(err), o(out);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  const std::string json((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
  const size_t at = json.find("\"global_step\": ");
  if (at != std::string::npos) r.global_step = std::atof(json.c_str() + at + 15);
  std::vector<double> rates;
  // The chief's lines (the launcher prefixes a task's lines with its name).
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t k = line.find("global_step/sec: ");
    // Launched: "[chief 0] INFO: ..."; started by hand: "INFO: [chief 0] ..."; alone: "INFO: ...".
    const bool chief = line.rfind("[chief 0]", 0) == 0 || line.rfind("INFO: [chief 0]", 0) == 0 ||
                       line.rfind("INFO: global", 0) == 0;
    if (k != std::string::npos && chief) rates.push_back(std::atof(line.c_str() + k + 17));
    // "[ps 0] INFO: /job:ps/task:0 served 600 updates from 1 replica in 0.87 s of CPU (...)"
    const size_t served = line.find(" served "), cpu = line.find(" s of CPU");
    if (line.rfind("[ps 0]", 0) == 0 && served != std::string::npos && cpu != std::string::npos) {
      r.ps_updates = std::atof(line.c_str() + served + 8);
      const size_t in = line.rfind(" in ", cpu);
      if (in != std::string::npos) r.ps_cpu_seconds = std::atof(line.c_str() + in + 4);
    }
  }
  // The first window holds the start (connecting, initialising): left out when there are more.
  if (rates.size() > 2) rates.erase(rates.begin());
  std::sort(rates.begin(), rates.end());
  if (!rates.empty()) r.steps_per_sec = rates[rates.size() / 2];
  std::filesystem::remove_all(dir);
  std::remove(err.c_str());
  std::remove(out.c_str());
  return r;
}

// A task of a hand-started job, its stderr appended to `log`.
pid_t start(const std::string& command, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = "exec " + command + " >/dev/null 2>>" + log;
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

size_t count_in(const std::string& path, const std::string& what, size_t from = 0) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t n = 0;
  for (size_t at = text.find(what, from); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

size_t size_of(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<size_t>(n);
}

// Polls until `ready` or `seconds` pass; false on the deadline.
bool wait_for(const std::function<bool()>& ready, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// A job of a chief, a ps and a worker on 127.0.0.1 to start by hand, in a directory of its
// own: its secret and cluster file, and the commands of its tasks.
struct HandJob {
  std::string dir, cli, common, train;  // train: a chief's or worker's command, less its --job
  bool ok = false;
};
// `base`: the chief's port; the ps's is base + 1, the worker's base + 2.
HandJob hand_job(const std::string& name, int base) {
  HandJob j;
  j.dir = std::filesystem::temp_directory_path().string() + "/cluster_bench_" + name + "_" +
          std::to_string(::getpid());
  std::filesystem::remove_all(j.dir);
  std::filesystem::create_directories(j.dir);
  j.cli = "env OPENBLAS_NUM_THREADS=1 " + std::string(TROUPE_CLI);
  const std::string secret = j.dir + "/job.secret", spec = j.dir + "/cluster.json";
  if (std::system((j.cli + " secret " + secret + " 2>/dev/null").c_str()) != 0) return j;
  std::ofstream(spec) << "{\"chief\": [\"127.0.0.1:" << base
                      << "\"], \"ps\": [\"127.0.0.1:" << base + 1
                      << "\"], \"worker\": [\"127.0.0.1:" << base + 2 << "\"]}";
  j.common = " --cluster " + spec + " --task 0 --secret " + secret;
  // Evaluating every 200 steps, the chief saves a checkpoint as often: a ps restarted is
  // restored from it.
  j.train = j.cli + " train --data fashion-mnist --hidden 256,128 --steps 1000000" +
            " --eval-every 200 --model-dir " + j.dir + "/model" + j.common;
  j.ok = true;
  return j;
}

// {restart to the first logged step, restart to the model sent}, in seconds; {-1, -1} on failure.
std::pair<double, double> ps_restart() {
  const HandJob job = hand_job("ps", 30000 + (::getpid() % 1000) * 3);
  if (!job.ok) return {-1, -1};
  const std::string &dir = job.dir, &cli = job.cli, &common = job.common, &train = job.train;
  const std::string chief_log = dir + "/chief.log";
  pid_t ps = start(cli + " server --job ps" + common, dir + "/ps.log");
  const pid_t worker = start(train + " --job worker", dir + "/worker.log");
  const pid_t chief = start(train + " --job chief", chief_log);
  std::pair<double, double> result{-1, -1};
  if (wait_for([&] { return count_in(chief_log, "saved checkpoint") > 0; }, 120)) {
    ::kill(ps, SIGKILL);
    ::waitpid(ps, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const size_t sent = count_in(chief_log, "sent the model");
    const auto t0 = std::chrono::steady_clock::now();
    ps = start(cli + " server --job ps" + common, dir + "/ps.log");
    size_t from = 0;
    if (wait_for([&] { return count_in(chief_log, "sent the model") > sent; }, 120)) {
      const double restored =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      from = size_of(chief_log);
      if (wait_for([&] { return count_in(chief_log, "step = ", from) > 0; }, 120)) {
        result = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  restored};
      }
    }
  }
  for (pid_t p : {chief, worker, ps}) ::kill(p, SIGKILL);
  for (pid_t p : {chief, worker, ps}) ::waitpid(p, nullptr, 0);
  if (result.first < 0) {
    std::ifstream in(chief_log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "cluster_bench: the chief's log:\n%s\n", text.c_str());
  }
  std::filesystem::remove_all(dir);
  return result;
}

// A job started by hand (a chief, a ps, a worker), then its ps killed and started again, then
// its worker: the seconds from each start to the first step logged after it (the chief's for
// the job and for the ps, after the chief has sent the ps the model; the worker's for the
// worker), summed. With `strangers`, 80 connections on each of the ps's ports (half silent,
// half a hello's start) are held and opened anew every 4.5 s throughout. -1 on failure.
double membership_churn(bool strangers) {
  const int base = 50000 + (::getpid() % 1000) * 4;  // chief, ps, worker, the ps's data port
  const HandJob job = hand_job("churn", base);
  if (!job.ok) return -1;
  const std::string &dir = job.dir, &train = job.train;
  const std::string server =
      job.cli + " server --job ps --data-port " + std::to_string(base + 3) + job.common;
  const std::string chief_log = dir + "/chief.log", worker_log = dir + "/worker.log";
  std::unique_ptr<troupe::bench::Strangers> held;
  if (strangers) {
    held = troupe::bench::Strangers::start(
        {static_cast<uint16_t>(base + 1), static_cast<uint16_t>(base + 3)}, 80,
        std::chrono::milliseconds(4500));
  }
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double total = -1;
  auto t0 = Clock::now();
  pid_t ps = start(server, dir + "/ps.log");
  pid_t worker = start(train + " --job worker", worker_log);
  const pid_t chief = start(train + " --job chief", chief_log);
  [&] {
    if (!wait_for([&] { return count_in(chief_log, "step = ") > 0; }, 120)) return;
    const double started = since(t0);
    // The chief restores a ps from its checkpoint: the first one must be there.
    if (!wait_for([&] { return count_in(chief_log, "saved checkpoint") > 0; }, 120)) return;
    ::kill(ps, SIGKILL);
    ::waitpid(ps, nullptr, 0);
    const size_t sent = count_in(chief_log, "sent the model");
    t0 = Clock::now();
    ps = start(server, dir + "/ps.log");
    if (!wait_for([&] { return count_in(chief_log, "sent the model") > sent; }, 120)) return;
    const size_t from = size_of(chief_log);
    if (!wait_for([&] { return count_in(chief_log, "step = ", from) > 0; }, 120)) return;
    const double restarted = since(t0);
    ::kill(worker, SIGKILL);
    ::waitpid(worker, nullptr, 0);
    const size_t logged = size_of(worker_log);
    t0 = Clock::now();
    worker = start(train + " --job worker", worker_log);
    if (!wait_for([&] { return count_in(worker_log, "step = ", logged) > 0; }, 120)) return;
    const double rejoined = since(t0);
    std::fprintf(
        stderr,
        "cluster_bench: membership churn%s: started %.2f s, ps restarted %.2f s, "
        "worker rejoined %.2f s%s\n",
        strangers ? " among strangers" : "", started, restarted, rejoined,
        held ? (", " + std::to_string(held->opened()) + " strangers' connections").c_str() : "");
    total = started + restarted + rejoined;
  }();
  held.reset();
  for (pid_t p : {chief, worker, ps}) ::kill(p, SIGKILL);
  for (pid_t p : {chief, worker, ps}) ::waitpid(p, nullptr, 0);
  if (total < 0) {
    for (const std::string& log : {chief_log, worker_log, dir + "/ps.log"}) {
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      std::fprintf(stderr, "cluster_bench: %s:\n%s\n", log.c_str(),
                   text.substr(text.size() > 3000 ? text.size() - 3000 : 0).c_str());
    }
  }
  std::filesystem::remove_all(dir);
  return total;
}

// A replica and a ps started by hand, every link between them through a proxy that delays each
// direction by `delay`; the ps listens for tensors on a fixed port and advertises the proxy's.
// The chief's steps/s, and whether the tensors crossed the proxy (its bytes against the model's).
Run proxied(const std::string& model, std::chrono::microseconds delay) {
  const std::string dir = std::filesystem::temp_directory_path().string() +
                          "/cluster_bench_proxy_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Run failed;
  const std::string cli = "env OPENBLAS_NUM_THREADS=1 " + std::string(TROUPE_CLI);
  const std::string secret = dir + "/job.secret";
  if (std::system((cli + " secret " + secret + " 2>/dev/null").c_str()) != 0) return failed;
  const int base = 40000 + (::getpid() % 1000) * 4;  // chief, ps, ps data
  const std::string host = "127.0.0.1";
  auto caf_proxy = troupe::bench::DelayProxy::start(host, base + 1, delay);
  auto data_proxy = troupe::bench::DelayProxy::start(host, base + 2, delay);
  if (!caf_proxy.ok() || !data_proxy.ok()) return failed;
  auto spec = [&](const std::string& path, int ps_port) {
    std::ofstream(path) << "{\"chief\": [\"" << host << ":" << base << "\"], \"ps\": [\"" << host
                        << ":" << ps_port << "\"]}";
    return " --cluster " + path + " --task 0 --secret " + secret;
  };
  const std::string ps_flags = spec(dir + "/ps.json", base + 1);
  const std::string chief_flags = spec(dir + "/chief.json", (*caf_proxy)->port());
  const pid_t ps =
      start(cli + " server --job ps" + ps_flags + " --data-port " + std::to_string(base + 2) +
                " --advertise-data-port " + std::to_string((*data_proxy)->port()),
            dir + "/ps.log");
  Run r = run("train" + model + " --job chief" + chief_flags);
  ::kill(ps, SIGKILL);
  ::waitpid(ps, nullptr, 0);
  const double floor = r.global_step * 2 * kModelBytes;
  if (r.status == 0 && static_cast<double>((*data_proxy)->bytes()) < floor) {
    r.status = -1;
    r.err = "the tensors did not cross the proxy: " + std::to_string((*data_proxy)->bytes()) +
            " bytes for " + std::to_string(r.global_step) + " steps";
  }
  std::filesystem::remove_all(dir);
  return r;
}

// A sparse model on two `troupe server` ps tasks: a 262144 x 16 embedding (16 MB) in two parts,
// batches of 128 examples of 4 ids, Adagrad. Bytes on the data channels per step, both ways
// (Session::traffic), against the floor: the ids and rows a step gathers, and the rows and ids
// of its sparse update. -1 on failure.
struct SparseTraffic {
  double per_step = -1, floor = 0;
};

SparseTraffic embedding_traffic() {
  namespace ops = troupe::ops;
  using troupe::runtime::DType;
  using troupe::runtime::Shape;
  using troupe::runtime::Tensor;
  constexpr int64_t kRows = 262144, kDim = 16, kExamples = 128, kIds = 4;
  const std::string dir = std::filesystem::temp_directory_path().string() +
                          "/cluster_bench_sparse_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SparseTraffic result;
  const std::string cli = std::string(TROUPE_CLI);
  const std::string secret_file = dir + "/job.secret", spec = dir + "/cluster.json";
  if (std::system((cli + " secret " + secret_file + " 2>/dev/null").c_str()) != 0) return result;
  const int base = 45000 + (::getpid() % 1000) * 3;
  std::map<std::string, std::string> cluster;
  std::vector<std::string> tasks;
  for (int i = 0; i < 2; ++i) {
    tasks.push_back(troupe::runtime::task_name("ps", i));
    cluster[tasks.back()] = "127.0.0.1:" + std::to_string(base + i);
  }
  // The chief's entry only completes the spec: this process plays it, with a Session of its own.
  std::ofstream(spec) << "{\"chief\": [\"127.0.0.1:" << base + 2 << "\"], \"ps\": [\""
                      << cluster[tasks[0]] << "\", \"" << cluster[tasks[1]] << "\"]}";
  std::vector<pid_t> servers;
  std::vector<std::string> logs;
  for (int i = 0; i < 2; ++i) {
    logs.push_back(dir + "/ps" + std::to_string(i) + ".log");
    servers.push_back(start(cli + " server --job ps --task " + std::to_string(i) + " --cluster " +
                                spec + " --secret " + secret_file,
                            logs.back()));
  }
  const bool up = wait_for(
      [&] { return count_in(logs[0], "serving") > 0 && count_in(logs[1], "serving") > 0; }, 30);
  auto secret = troupe::actors::load_job_secret(secret_file);
  if (!up || !secret.ok()) {
    std::ifstream in(logs[0]);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "cluster_bench: the sparse model's ps tasks did not start: %s\n%s\n",
                 secret.ok() ? "" : secret.status().to_string().c_str(), text.c_str());
  } else {
    troupe::runtime::Graph g;
    troupe::runtime::GraphBuilder b(&g);
    ops::SparseOutput ids = ops::sparse_placeholder(b, DType::kInt64, "ids");
    auto parts = ops::variable_parts(b, "emb", Shape{kRows, kDim}, DType::kFloat32,
                                     ops::truncated_normal(b, Shape{kRows, kDim}, 0, 0.25), 2);
    auto x = ops::embedding_lookup_sparse(b, parts, ids, {}, "mean");
    const int train =
        ops::minimize(b, ops::reduce_sum(b, ops::square(b, x)), ops::Optimizer::adagrad(0.1));
    const int init = ops::global_variables_initializer(b);
    troupe::actors::Runtime rt(troupe::actors::RuntimeOptions{.secret = *secret});
    auto placed =
        troupe::runtime::place_variables(&g, tasks, troupe::runtime::PsStrategy::kRoundRobin);
    auto session = b.ok() && placed.ok()
                       ? troupe::actors::Session::create(rt, g, {.cluster = cluster})
                       : troupe::runtime::Result<std::unique_ptr<troupe::actors::Session>>(
                             b.ok() ? placed.status() : b.status());
    std::mt19937_64 rng(1);
    auto batch = [&] {
      std::vector<std::vector<int64_t>> rows(kExamples);
      for (auto& r : rows) {
        for (int k = 0; k < kIds; ++k) r.push_back(static_cast<int64_t>(rng() % kRows));
      }
      troupe::runtime::FeedList f;
      ops::feed_sparse(&f, ids, troupe::runtime::SparseTensor::from_rows<int64_t>(rows));
      return f;
    };
    bool ran = session.ok() && (*session)->run({}, {}, {init}).ok();
    for (int i = 0; ran && i < 5; ++i) ran = (*session)->run(batch(), {}, {train}).ok();
    if (ran) {
      const auto before = (*session)->traffic();
      const int steps = quick ? 50 : 200;
      for (int i = 0; ran && i < steps; ++i) ran = (*session)->run(batch(), {}, {train}).ok();
      const auto after = (*session)->traffic();
      if (ran) {
        result.per_step = double(after.bytes_sent + after.bytes_received - before.bytes_sent -
                                 before.bytes_received) /
                          steps;
        result.floor = 2.0 * kExamples * kIds * (8 + 4 * kDim);
      }
    }
    if (!ran) {
      std::fprintf(stderr, "cluster_bench: the sparse model failed: %s\n",
                   session.ok() ? "a step failed" : session.status().to_string().c_str());
    }
  }
  for (pid_t p : servers) ::kill(p, SIGKILL);
  for (pid_t p : servers) ::waitpid(p, nullptr, 0);
  std::filesystem::remove_all(dir);
  return result;
}

// membership_churn: quiet and stranger-ridden runs alternated, the median pair's ratio.
bool churn_bar(troupe::bench::Bars* bars) {
  std::vector<std::pair<double, double>> pairs;  // {quiet, among strangers}
  for (int i = 0; i < (quick ? 1 : 3); ++i) {
    const double quiet = membership_churn(false), crowded = membership_churn(true);
    if (quiet < 0 || crowded < 0) {
      std::fprintf(stderr, "cluster_bench: the membership churn run failed\n");
      return false;
    }
    pairs.push_back({quiet, crowded});
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const auto& a, const auto& b) { return a.second / a.first < b.second / b.first; });
  const auto [quiet, crowded] = pairs[pairs.size() / 2];
  bars->add("membership_churn", crowded, "s", "no_strangers", quiet, crowded / quiet);
  return true;
}

bool ok(const Run& r, const char* what) {
  if (r.status == 0 && r.steps_per_sec > 0) return true;
  std::fprintf(stderr, "cluster_bench: %s failed (status %d):\n%s\n", what, r.status,
               r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0).c_str());
  return false;
}

// The one-way latency of this machine's loopback: a byte bounced over TCP, the median of 2000
// round trips, halved; 0 when it cannot be measured.
double loopback_latency() {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return 0;
  }
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  const bool connected = ::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  const int server = connected ? ::accept(listener, nullptr, nullptr) : -1;
  ::close(listener);
  if (server < 0) {
    ::close(client);
    return 0;
  }
  for (int fd : {client, server}) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  constexpr int kTrips = 2000;
  std::thread echo([server] {
    char c = 0;
    for (int i = 0; i < kTrips; ++i) {
      if (::read(server, &c, 1) != 1 || ::write(server, &c, 1) != 1) return;
    }
  });
  using Clock = std::chrono::steady_clock;
  std::vector<double> trips;
  char c = 1;
  for (int i = 0; i < kTrips; ++i) {
    const auto t0 = Clock::now();
    if (::write(client, &c, 1) != 1 || ::read(client, &c, 1) != 1) break;
    trips.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  ::shutdown(client, SHUT_RDWR);
  echo.join();
  ::close(client);
  ::close(server);
  if (trips.size() != kTrips) return 0;
  std::sort(trips.begin(), trips.end());
  return trips[trips.size() / 2] / 2;
}

// --workers N: the scaling of N training replicas (1, 2, 4, ... up to N) against N processes
// alone, asynchronous and synchronous, and ps 0's CPU per update (a replica's step's updates in
// one call) against 1 replica's. Then a model of the cluster (cluster_model.h), fed with the
// costs measured here (a step's compute: one process alone; its bytes, the ps's CPU and the
// replica's CPU beyond the process alone: the 1-replica run; the loopback's latency), checked
// against each run here (none is fitted to them), and its prediction for clusters this
// machine cannot run: 8 to 64 workers, each with a ps beside it on a host of its own (as TF's
// distributed_replicated benchmark ran), on 10 and 25 Gbit/s links with 50 us latency, for this
// DNN and one ten times its size (ten times its math, its bytes and its ps's work), beside TF
// 1.x's published figures for 16 and 64 workers (ResNet and Inception on GPUs, far more math
// per byte than this DNN on a CPU core: the same measure, a different model).
bool scaling(int64_t max_workers, const std::string& model, troupe::bench::Bars* bars) {
  using troupe::bench::Cluster;
  using troupe::bench::simulate;
  const std::vector<int> cores = own_cores();
  Run alone = run("train" + model);
  if (!ok(alone, "one process")) return false;
  const double alone_rate = alone.steps_per_sec * kBatch;
  struct Point {
    int workers;
    bool sync;
    double efficiency;
  };
  std::vector<Point> measured;
  troupe::bench::StepCosts costs;
  double ps_us_1[2] = {0, 0};
  for (int n = 1; n <= max_workers; n *= 2) {
    for (bool sync : {false, true}) {
      const char* mode = sync ? "sync" : "async";
      // The run of median rate of three (one with --quick): this machine's load moves them.
      std::vector<Run> runs;
      for (int i = 0; i < (quick ? 1 : 3); ++i) {
        runs.push_back(run("cluster --pin --ps 1 --workers " + std::to_string(n) + " -- train" +
                           (sync ? " --sync" : "") + model));
        if (!ok(runs.back(), mode)) return false;
        if (runs.back().ps_updates <= 0) {
          const std::string& err = runs.back().err;
          std::fprintf(stderr, "cluster_bench: ps 0 did not say what it served:\n%s\n",
                       err.substr(err.size() > 2000 ? err.size() - 2000 : 0).c_str());
          return false;
        }
      }
      std::sort(runs.begin(), runs.end(),
                [](const Run& a, const Run& b) { return a.steps_per_sec < b.steps_per_sec; });
      const Run& r = runs[runs.size() / 2];
      const double examples = r.steps_per_sec * kBatch * (sync ? n : 1);
      const double efficiency = examples / (n * alone_rate);
      const double ps_us = 1e6 * r.ps_cpu_seconds / r.ps_updates;
      const std::string at = std::string(mode) + "_w" + std::to_string(n);
      if (n == 1) ps_us_1[sync] = ps_us;
      bars->add("scaling_" + at, efficiency, "efficiency", "n_processes_alone", n * alone_rate,
                efficiency);
      bars->add("ps_cpu_per_update_" + at, ps_us, "us", "1_replica", ps_us_1[sync],
                ps_us / ps_us_1[sync]);
      measured.push_back({n, sync, efficiency});
      if (n == 1 && !sync) {
        const double steps = std::max(1.0, r.global_step);
        costs.compute_s = 1 / alone.steps_per_sec;
        costs.bytes_per_step = r.loopback_bytes / steps;
        costs.ps_cpu_per_update_s = r.ps_cpu_seconds / r.ps_updates;
        // The replica's CPU beyond the same steps alone (the start and the end cancel out).
        costs.worker_comm_s =
            std::max(0.0, (r.cpu_seconds - r.ps_cpu_seconds - alone.cpu_seconds) / steps);
      }
    }
  }
  // On one machine a transfer is the CPU of the processes at its ends, which their measured
  // costs hold: the loopback's latency alone is the link's own.
  const troupe::bench::Link loopback{1e15, loopback_latency()};
  if (loopback.latency_s <= 0) {
    std::fprintf(stderr, "cluster_bench: could not measure the loopback's latency\n");
    return false;
  }
  std::fprintf(stderr,
               "cluster_bench: model costs: compute %.3f ms, worker's calls %.3f ms, %.0f bytes "
               "a step, ps %.3f ms an update; loopback latency %.1f us\n",
               1e3 * costs.compute_s, 1e3 * costs.worker_comm_s, costs.bytes_per_step,
               1e3 * costs.ps_cpu_per_update_s, 1e6 * loopback.latency_s);
  for (const Point& p : measured) {
    const Cluster here = Cluster::one_machine(p.workers, 1, double(cores.size()), loopback);
    const double predicted = simulate(costs, here, p.sync).efficiency;
    bars->add(
        std::string("model_") + (p.sync ? "sync" : "async") + "_w" + std::to_string(p.workers),
        predicted, "efficiency", "measured", p.efficiency, predicted / p.efficiency);
  }
  troupe::bench::StepCosts big = costs;
  for (double* c :
       {&big.compute_s, &big.worker_comm_s, &big.bytes_per_step, &big.ps_cpu_per_update_s}) {
    *c *= 10;
  }
  // TF 1.x's distributed_replicated scaling as published: about 0.9 at 16 workers, 0.8 to 0.94
  // at 64 (the lower end the peer).
  const std::map<int, double> tf = {{16, 0.9}, {64, 0.8}};
  for (const auto& [name, c] : {std::pair{"dnn", &costs}, {"dnn_x10", &big}}) {
    for (double gbit : {10.0, 25.0}) {
      for (int n : {8, 16, 32, 64}) {
        const Cluster cluster = Cluster::colocated(n, troupe::bench::Link::gbit(gbit, 50e-6));
        const double e = simulate(*c, cluster, true, quick ? 50 : 200).efficiency;
        const auto peer = tf.find(n);
        bars->add(std::string("predicted_sync_") + name + "_" + std::to_string(int(gbit)) + "g_w" +
                      std::to_string(n),
                  e, "efficiency", peer == tf.end() ? "-" : "tf1_distributed_replicated",
                  peer == tf.end() ? 0 : peer->second, peer == tf.end() ? 0 : e / peer->second);
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::bench::Flags flags("cluster_bench", "bench_cluster.json");
  std::string only;
  flags.value("only", &only, "BAR", "run this bar alone (churn: membership_churn)");
  int64_t workers = 0;
  flags.value("workers", &workers, "N",
              "the scaling of 1, 2, 4, ... N replicas, the ps's CPU per update, and the cluster "
              "model's check and predictions, alone (0: the other bars)");
  flags.parse(argc, argv);
  if (workers < 0 || workers > 64) {
    std::fprintf(stderr, "cluster_bench: --workers %lld: 1 to 64 (0: the other bars)\n",
                 static_cast<long long>(workers));
    return 2;
  }
  if (!only.empty() && only != "churn") {
    std::fprintf(stderr, "cluster_bench: --only %s: the bar run alone is churn\n", only.c_str());
    return 2;
  }
  quick = flags.quick;
  const std::string json = flags.json;
  const std::string steps = quick ? "600" : "2000";
  const std::string model =
      " --data fashion-mnist --hidden 256,128 --batch-size 128 --eval-every 100000 --steps " +
      steps;
  troupe::bench::Bars bars("cluster");

  if (workers > 0) {
    if (!scaling(workers, model, &bars)) return 1;
    bars.write_json(json);
    return 0;
  }
  if (only == "churn") {
    if (!churn_bar(&bars)) return 1;
    bars.write_json(json);
    return 0;
  }
  const std::vector<int> cores = own_cores();
  if (cores.size() < 2) {
    std::fprintf(stderr, "cluster_bench: 2 replicas need 2 cores; this process has %zu\n",
                 cores.size());
    return 1;
  }
  // The ps shares the replicas' cores in both runs where it cannot have one of its own in both.
  const bool shared = cores.size() < 3;
  const std::string one_core = shared ? std::to_string(cores[0]) : "";
  const std::string one_replica = "cluster --pin --ps 1 --workers 1 -- train";
  const std::string two_replicas = "cluster --pin --ps 1 --workers 2 -- train";
  Run alone = run("train" + model);
  Run one = run(one_replica + model);
  Run one_sync = run(one_replica + " --sync" + model);
  if (!ok(alone, "one process") || !ok(one, "1 replica") || !ok(one_sync, "1 sync replica")) {
    return 1;
  }
  auto examples = [](const Run& r, double per_step) { return r.steps_per_sec * kBatch * per_step; };
  // 1 and 2 replicas alternated, a few times: the machine's load moves the rates between runs
  // far more than within a pair, so the bar is the median pair's ratio.
  struct Pair {
    double two_x_one = 0, two = 0;
    double ratio() const { return two / two_x_one; }
  };
  std::vector<Pair> async_pairs, sync_pairs;
  Run two, two_sync;  // the first ones, for the lines below
  for (int i = 0; i < (quick ? 1 : 3); ++i) {
    Run a1 = run(one_replica + model, one_core), a2 = run(two_replicas + model);
    Run s1 = run(one_replica + " --sync" + model, one_core);
    Run s2 = run(two_replicas + " --sync" + model);
    if (!ok(a1, "1 replica") || !ok(a2, "2 replicas") || !ok(s1, "1 sync replica") ||
        !ok(s2, "2 sync replicas")) {
      return 1;
    }
    async_pairs.push_back({2 * examples(a1, 1), examples(a2, 1)});
    sync_pairs.push_back({2 * examples(s1, 1), examples(s2, 2)});
    if (i == 0) {
      two = a2;
      two_sync = s2;
    }
  }
  auto median = [](std::vector<Pair> pairs) {
    std::sort(pairs.begin(), pairs.end(),
              [](const Pair& a, const Pair& b) { return a.ratio() < b.ratio(); });
    return pairs[pairs.size() / 2];
  };
  for (const auto& [name, pairs] : {std::pair{"async", &async_pairs}, {"sync", &sync_pairs}}) {
    std::fprintf(stderr, "cluster_bench: %s scaling of each pair:", name);
    for (const Pair& p : *pairs) std::fprintf(stderr, " %.3f", p.ratio());
    std::fprintf(stderr, "\n");
  }
  const Pair async = median(async_pairs), sync = median(sync_pairs);
  bars.add("async_scaling", async.two, "examples/s", "2x_one_replica", async.two_x_one,
           async.ratio());
  bars.add("sync_scaling", sync.two, "examples/s", "2x_one_replica", sync.two_x_one, sync.ratio());
  if (shared) {
    const double spare1 = examples(one, 1), spare_sync1 = examples(one_sync, 1);
    bars.add("async_scaling_spare_core", async.two, "examples/s", "2x_one_replica_own_ps_core",
             2 * spare1, async.two / (2 * spare1));
    bars.add("sync_scaling_spare_core", sync.two, "examples/s", "2x_one_replica_own_ps_core",
             2 * spare_sync1, sync.two / (2 * spare_sync1));
  }
  const double async1 = examples(one, 1);
  bars.add("cluster_1_vs_process", async1, "examples/s", "one_process", examples(alone, 1),
           async1 / examples(alone, 1));
  auto cpu_us = [](const Run& r) { return 1e6 * r.cpu_seconds / (r.global_step * kBatch); };
  bars.add("cpu_per_example_1", cpu_us(one), "us", "one_process", cpu_us(alone),
           cpu_us(one) / cpu_us(alone));
  bars.add("cpu_per_example_2", cpu_us(two), "us", "one_process", cpu_us(alone),
           cpu_us(two) / cpu_us(alone));
  const double per_step = two.loopback_bytes / std::max(1.0, two.global_step);
  bars.add("bytes_per_step", per_step, "bytes", "two_x_model", 2 * kModelBytes,
           per_step / (2 * kModelBytes));
  const SparseTraffic sparse = embedding_traffic();
  if (sparse.per_step < 0) return 1;
  bars.add("sparse_bytes_per_step", sparse.per_step, "bytes", "rows_floor", sparse.floor,
           sparse.per_step / sparse.floor);
  const auto [back, restored] = ps_restart();
  if (back < 0) {
    std::fprintf(stderr, "cluster_bench: the ps restart run failed\n");
    return 1;
  }
  bars.add("ps_restart", back, "s", "2s_plus_restore", 2 + restored, back / (2 + restored));
  const auto delay = std::chrono::milliseconds(1);
  Run direct = proxied(model, std::chrono::microseconds(0));
  Run delayed = proxied(model, delay);
  if (!ok(direct, "1 replica through an undelayed proxy") ||
      !ok(delayed, "1 replica through a 1 ms proxy")) {
    return 1;
  }
  const double step_ms = 1e3 / delayed.steps_per_sec, direct_ms = 1e3 / direct.steps_per_sec;
  const double round_trips_ms = 2 * 2 * 1e3 * std::chrono::duration<double>(delay).count();
  bars.add("link_delay_1ms", step_ms, "ms", "no_delay", direct_ms, step_ms / direct_ms);
  bars.add("link_delay_added", step_ms - direct_ms, "ms", "two_round_trips", round_trips_ms,
           (step_ms - direct_ms) / round_trips_ms);
  if (!churn_bar(&bars)) return 1;
  bars.write_json(json);
  return 0;
}
