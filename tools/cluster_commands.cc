// troupe server (a ps task), troupe secret (a job secret for machines of your own) and troupe
// cluster (every task of a cluster as a process of this machine, as torchrun and horovodrun
// start theirs).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "actors/server.h"
#include "estimators/training.h"
#include "runtime/log.h"
#include "runtime/record_io.h"
#include "tools/cli.h"

namespace troupe::cli {

int server(const std::vector<std::string>& args) {
  std::vector<std::string> valued = kClusterFlags;
  valued.insert(valued.end(), {"bind", "data-port", "advertise-data-port", "handshake-timeout"});
  auto parsed = parse_flags(args, valued, {"insecure", "pin"});
  if (!parsed.ok()) return usage_error(parsed.status().message());
  const Flags& flags = *parsed;
  auto cluster = cluster_of(flags);
  if (!cluster.ok()) return usage_error(cluster.status().message());
  if (cluster->cluster.empty()) {
    return usage_error(
        "troupe server needs its cluster: --cluster FILE --job ps --task N, or "
        "TF_CONFIG");
  }
  if (cluster->task_type != estimators::TaskType::kPs) {
    return usage_error("troupe server hosts a ps task, not " + cluster->task_label() +
                       " (which runs troupe train)");
  }
  return serve_ps(*cluster, flags, /*secret_required=*/true);
}

int serve_ps(const estimators::ClusterConfig& cluster, const Flags& flags, bool secret_required) {
  if (!std::getenv("TROUPE_LAUNCHED")) runtime::set_log_task(cluster.task_label());
  // Checked here, so that a bad entry is a usage error; run_ps serves at it.
  if (auto where = cluster.host_port(); !where.ok()) return usage_error(where.status().message());
  auto secret = secret_of(flags);
  if (!secret.ok()) return fail(secret.status());
  if (!*secret && secret_required && !flags.count("insecure")) {
    return usage_error(
        "troupe server needs the job secret (--secret FILE or TROUPE_JOB_SECRET; "
        "troupe secret FILE makes one), or --insecure on a trusted network");
  }
  if (!*secret && !secret_required) {
    runtime::log_warning(
        "no job secret (--secret or TROUPE_JOB_SECRET): anyone who can reach this ps can read "
        "or change the model");
  }
  // Tensors travel on a port of their own: any free one unless told (a firewall's opening), and
  // peers dial the one advertised (a forward in front of the server: NAT, a container, a proxy).
  int64_t ports[2] = {0, 0};  // data port, advertised data port
  const char* port_flags[2] = {"data-port", "advertise-data-port"};
  for (int i = 0; i < 2; ++i) {
    if (!flags.count(port_flags[i])) continue;
    std::string error;
    if (!to_int(port_flags[i], flags.at(port_flags[i]), 1, &ports[i], &error) || ports[i] > 65535) {
      return usage_error(std::string("--") + port_flags[i] + ": '" + flags.at(port_flags[i]) +
                         "' is not a port");
    }
  }
  estimators::RunConfig config;
  config.cluster = cluster;
  config.job_secret = *secret;
  actors::ServerOptions so;
  // The address its cluster entry names (run_ps), never every interface unless told (--bind).
  so.host = flags.count("bind") ? flags.at("bind") : "";
  so.data_port = static_cast<uint16_t>(ports[0]);
  so.advertised_data_port = static_cast<uint16_t>(ports[1]);
  so.data.follow_incoming_cpu = flags.count("pin") > 0;
  // A stranger's whole handshake on either port: about a round trip, and no byte extends it.
  if (auto t = flags.find("handshake-timeout"); t != flags.end()) {
    int64_t ms = 0;
    std::string error;
    if (!to_int("handshake-timeout", t->second, 1, &ms, &error) || ms > 600000) {
      return usage_error("--handshake-timeout: '" + t->second +
                         "' is not a number of milliseconds from 1 to 600000");
    }
    so.data.handshake_timeout = std::chrono::milliseconds(ms);
  }
  estimators::StopRequest stop;
  GracefulStop graceful;
  graceful.watch([&stop] { stop.request(); });
  const runtime::Status served = estimators::run_ps(config, so, stop);
  graceful.finish();
  if (!served.ok()) return fail(served);
  runtime::log_info("stopped");
  return 0;
}

int secret(const std::vector<std::string>& args) {
  if (args.size() == 3 && args[0] == "--reader") {
    if (auto s = actors::make_reader_secret(args[1], args[2]); !s.ok()) return fail(s);
    runtime::log_info("wrote the reader's secret of ", args[1], " to ", args[2],
                      ": give it to the evaluator (mode 600), which then reads a ps's "
                      "variables but cannot change them");
    return 0;
  }
  if (args.size() != 1 || args[0].rfind("-", 0) == 0) {
    return usage_error(
        "troupe secret FILE: writes a new job secret to FILE; troupe secret --reader JOB FILE: "
        "writes the reader's secret of job secret JOB (an evaluator's) to FILE");
  }
  if (auto s = actors::make_job_secret(args[0]); !s.ok()) return fail(s);
  runtime::log_info("wrote a new job secret to ", args[0],
                    ": copy it to every machine of the job (mode 600) and pass --secret or set "
                    "TROUPE_JOB_SECRET");
  return 0;
}

namespace {

// One process of a launched cluster and its output, read line by line.
struct Task {
  std::string name;  // "chief 0"
  estimators::TaskType type = estimators::TaskType::kNone;
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends of its stdout and stderr
  std::string out_line, err_line;
  bool exited = false;
  int status = 0;
};

int signal_pipe[2] = {-1, -1};
void on_launcher_signal(int sig) {
  const char byte = static_cast<char>(sig);
  if (::write(signal_pipe[1], &byte, 1) != 1) ::_exit(128 + sig);
}

// The kernel's range of ports for outgoing connections' local ends ([32768, 60999] by default).
std::pair<int, int> ephemeral_ports() {
  int lo = 32768, hi = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768, hi = 60999;
    std::fclose(f);
  }
  return {lo, hi};
}

// Free ports on `host`: bound at once so that no two tasks get the same, released together just
// before the tasks start (a task binds its own right away). Outside the kernel's ephemeral
// range: a port from it, released, may become the local end of any process's outgoing
// connection before the task binds it (seen with a ps that then could not serve).
runtime::Result<std::vector<uint16_t>> free_ports(const std::string& host, size_t n) {
  const auto [lo, hi] = ephemeral_ports();
  // The wider of the ranges below and above the ephemeral one, ports under 1024 left out.
  const bool below = lo - 1024 >= 65535 - hi;
  const int first = below ? 1024 : hi + 1, last = below ? lo - 1 : 65535;
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(first, std::max(first, last));
  for (int tries = 0; ports.size() < n && tries < 1000; ++tries) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(pick(rng)));
    if (fd < 0 || ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
      if (fd >= 0) ::close(fd);
      for (int f : fds) ::close(f);
      return runtime::unavailable("no free port on ", host, ": ", std::strerror(errno));
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);  // taken: try another
      continue;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int f : fds) ::close(f);
  if (ports.size() < n) {
    return runtime::unavailable("no ", n, " free ports on ", host, " in [", first, ", ", last, "]");
  }
  return ports;
}

std::string cluster_json(const std::map<std::string, std::vector<std::string>>& jobs) {
  std::string j = "{";
  for (const auto& [job, addresses] : jobs) {
    if (j.size() > 1) j += ", ";
    j += "\"" + job + "\": [";
    for (size_t i = 0; i < addresses.size(); ++i) {
      j += (i ? ", \"" : "\"") + addresses[i] + "\"";
    }
    j += "]";
  }
  return j + "}";
}

// `cpus`: the cores the task may run on; empty: wherever the launcher may.
runtime::Result<Task> spawn_task(const std::string& self, estimators::TaskType type, int index,
                                 const std::vector<std::string>& command,
                                 const std::string& cluster, const std::string& secret,
                                 const std::vector<int>& cpus, int nice) {
  const std::string job = estimators::task_type_name(type);
  Task t;
  t.name = job + " " + std::to_string(index);
  t.type = type;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return runtime::unavailable("pipe: ", std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return runtime::unavailable("pipe: ", std::strerror(errno));
  }
  const std::string tf_config = "{\"cluster\": " + cluster + ", \"task\": {\"type\": \"" + job +
                                "\", \"index\": " + std::to_string(index) + "}}";
  std::vector<std::string> argv = {self};
  argv.insert(argv.end(), command.begin(), command.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return runtime::unavailable("fork: ", std::strerror(errno));
  if (pid == 0) {
    // A group of its own: a Ctrl-C at the terminal reaches the launcher alone, which passes it
    // on once. And it ends with the launcher, however the launcher ends.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : cpus) CPU_SET(cpu, &set);
      if (::sched_setaffinity(0, sizeof set, &set) != 0) {
        std::fprintf(stderr, "cannot pin to its cores: %s\n", std::strerror(errno));
        ::_exit(1);
      }
    }
    if (nice != 0 && ::setpriority(PRIO_PROCESS, 0, nice) != 0) {
      std::fprintf(stderr, "cannot take nice %d: %s\n", nice, std::strerror(errno));
    }
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::setenv("TF_CONFIG", tf_config.c_str(), 1);
    ::setenv("TROUPE_JOB_SECRET", secret.c_str(), 1);
    ::setenv("TROUPE_LAUNCHED", "1", 1);
    ::execv(self.c_str(), cargv.data());
    std::fprintf(stderr, "cannot start %s: %s\n", self.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  t.pid = pid;
  t.out = out[0];
  t.err = err[0];
  return t;
}

// Passes whole lines on: the chief's stdout as it is (its JSON line is the launcher's result),
// everything else to stderr with the task's name in front.
void pump(Task& t, int fd, bool flush_partial) {
  std::string& pending = fd == t.out ? t.out_line : t.err_line;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  size_t start = 0, nl;
  while ((nl = pending.find('\n', start)) != std::string::npos ||
         (flush_partial && start < pending.size())) {
    const size_t end = nl == std::string::npos ? pending.size() : nl;
    const std::string line = pending.substr(start, end - start);
    if (fd == t.out && t.type == estimators::TaskType::kChief) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    } else {
      std::fprintf(stderr, "[%s] %s\n", t.name.c_str(), line.c_str());
    }
    start = end + 1;
    if (nl == std::string::npos) break;
  }
  pending.erase(0, std::min(start, pending.size()));
}

// The launcher's cores, and with --pin each training replica (the chief first) on a core of its
// own, the ps and evaluator tasks on the cores left over (all of them when none is), as a
// benchmark pins its processes. More replicas than cores: they take the cores in turn, with a
// warning.
struct Pinning {
  std::vector<int> cores;
  size_t replicas = 0;
  std::vector<int> replica(size_t i) const { return {cores[i % cores.size()]}; }
  std::vector<int> others() const {
    if (crowded()) return cores;
    return std::vector<int>(cores.begin() + static_cast<std::ptrdiff_t>(replicas), cores.end());
  }
  // The replicas fill the cores: the ps tasks have none of their own.
  bool crowded() const { return replicas >= cores.size(); }
};

runtime::Result<Pinning> pinning(size_t replicas) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return runtime::unavailable("cannot read this process's cores: ", std::strerror(errno));
  }
  Pinning p;
  p.replicas = replicas;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) p.cores.push_back(cpu);
  }
  return p;
}

// Every replica waits for the ps tasks' replies, each step. Where the replicas fill the cores, a
// ps woken by a call waits for a time slice of a core that computes, and every replica with it;
// the training tasks take this niceness instead, so that the ps runs when a call comes (2 sync
// replicas on 2 cores, alternated runs: 170-195 global steps/s at nice 0, 220-270 at nice 10).
constexpr int kCrowdedNice = 10;

void signal_all(std::vector<Task>& tasks, int sig, bool ps_too = true) {
  for (Task& t : tasks) {
    if (!t.exited && (ps_too || t.type != estimators::TaskType::kPs)) ::kill(t.pid, sig);
  }
}

// What `troupe cluster` was asked for: its own flags before --, the tasks' command after.
struct LaunchRequest {
  int64_t ps = 1, workers = 2, grace = 30;
  std::string host = "127.0.0.1";
  std::string secret;  // --secret FILE; "": a new one for this job
  bool evaluator = false, pin = false;
  std::vector<std::string> command;
};

// An error is a usage error, naming the flag.
runtime::Result<LaunchRequest> launch_request(const std::vector<std::string>& args) {
  auto dash = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> own(args.begin(), dash);
  LaunchRequest r;
  r.command.assign(dash == args.end() ? dash : dash + 1, args.end());
  TROUPE_ASSIGN_OR_RETURN(
      Flags flags,
      parse_flags(own, {"ps", "workers", "host", "secret", "grace"}, {"evaluator", "pin"}));
  if (r.command.empty() || r.command[0] != "train") {
    return runtime::invalid_argument(
        "troupe cluster ... -- train ...: the tasks' command comes after --");
  }
  std::string error;
  if (!to_int("ps", flags.count("ps") ? flags.at("ps") : "1", 1, &r.ps, &error) ||
      !to_int("workers", flags.count("workers") ? flags.at("workers") : "2", 1, &r.workers,
              &error) ||
      !to_int("grace", flags.count("grace") ? flags.at("grace") : "30", 1, &r.grace, &error)) {
    return runtime::invalid_argument(error);
  }
  for (const char* f : {"--cluster", "--job", "--task", "--secret", "--cluster-resolver"}) {
    if (std::find(r.command.begin(), r.command.end(), f) != r.command.end()) {
      return runtime::invalid_argument("the launcher sets ", f, " for each task itself");
    }
  }
  if (flags.count("host")) r.host = flags.at("host");
  if (flags.count("secret")) r.secret = flags.at("secret");
  r.evaluator = flags.count("evaluator") > 0;
  r.pin = flags.count("pin") > 0;
  return r;
}

// Passes the tasks' output on until every task has ended: the chief's end (or a ps's failure)
// ends the others, a first signal stops the chief gracefully, a second kills every task, and
// tasks still running `grace` seconds after they were asked to stop are killed. Tasks are
// stopped with SIGINT, a user's stop (SIGTERM would make them exit 143: asked to go by their
// launcher, to be restarted). The launcher's exit status: the chief's, or 1.
int supervise(std::vector<Task>& tasks, int64_t grace, const runtime::Status& started) {
  using estimators::TaskType;
  int result = started.ok() ? -1 : 1;
  if (!started.ok()) {
    runtime::log_error(started.to_string());
    signal_all(tasks, SIGINT);
  }
  using Clock = std::chrono::steady_clock;
  int signals = 0;
  bool stopping = false, ps_stopping = false, killed = false;
  auto deadline = Clock::time_point::max();  // for the tasks to end once asked to
  // The ps tasks go last, so that the others end their steps against them instead of failing.
  auto stop_all = [&](int sig, const std::string& why) {
    if (stopping) return;
    stopping = true;
    runtime::log_info(why, ": stopping every task");
    signal_all(tasks, sig, /*ps_too=*/false);
    deadline = Clock::now() + std::chrono::seconds(grace);
  };
  if (!started.ok()) {
    stopping = ps_stopping = true;
    deadline = Clock::now() + std::chrono::seconds(grace);
  }
  for (;;) {
    std::vector<pollfd> fds = {{signal_pipe[0], POLLIN, 0}};
    for (Task& t : tasks) {
      if (t.out >= 0) fds.push_back({t.out, POLLIN, 0});
      if (t.err >= 0) fds.push_back({t.err, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    for (const pollfd& p : fds) {
      if (p.fd == signal_pipe[0] && (p.revents & POLLIN)) {
        char sig = 0;
        if (::read(signal_pipe[0], &sig, 1) == 1) {
          if (++signals == 1) {
            // The chief stops gracefully (checkpoint, evaluation, its JSON line); the rest
            // stop when it has.
            runtime::log_info("interrupted: stopping the chief (again to stop every task now)");
            for (Task& t : tasks) {
              if (t.type == TaskType::kChief && !t.exited) ::kill(t.pid, SIGINT);
            }
            deadline = Clock::now() + std::chrono::seconds(grace);
          } else {
            signal_all(tasks, SIGKILL);
          }
        }
        continue;
      }
      for (Task& t : tasks) {
        if (p.fd != t.out && p.fd != t.err) continue;
        if (p.revents & POLLIN) pump(t, p.fd, false);
        if ((p.revents & (POLLHUP | POLLERR)) && !(p.revents & POLLIN)) {
          pump(t, p.fd, true);
          ::close(p.fd);
          (p.fd == t.out ? t.out : t.err) = -1;
        }
      }
    }
    for (Task& t : tasks) {
      if (t.exited) continue;
      int status = 0;
      if (::waitpid(t.pid, &status, WNOHANG) != t.pid) continue;
      t.exited = true;
      t.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (t.status != 0 || !stopping) runtime::log_info(t.name, " exited with status ", t.status);
      if (t.type == TaskType::kChief) {
        if (result < 0) result = t.status;
        stop_all(SIGINT, "the chief has ended");
      } else if (t.type == TaskType::kPs && !stopping && t.status != 0) {
        // A ps ends by itself (status 0) once the chief has finished; otherwise it failed.
        if (result < 0) result = 1;
        stop_all(SIGINT, t.name + " has ended");
      }
    }
    const bool all_done = std::all_of(tasks.begin(), tasks.end(), [](const Task& t) {
      return t.exited && t.out < 0 && t.err < 0;
    });
    if (all_done) break;
    const bool only_ps = std::all_of(tasks.begin(), tasks.end(), [](const Task& t) {
      return t.exited || t.type == TaskType::kPs;
    });
    if (stopping && !ps_stopping && only_ps) {
      ps_stopping = true;
      signal_all(tasks, SIGINT);
    }
    if (!killed && Clock::now() > deadline) {
      runtime::log_warning("tasks still running ", grace, " s after the stop: killing them");
      signal_all(tasks, SIGKILL);
      killed = true;
    }
  }
  return result < 0 ? 1 : result;
}

}  // namespace

int cluster(const std::vector<std::string>& args, const std::string& self) {
  using estimators::TaskType;
  auto request = launch_request(args);
  if (!request.ok()) return usage_error(request.status().message());
  const LaunchRequest& r = *request;
  char dir_template[] = "/tmp/troupe-cluster-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    return fail(
        runtime::unavailable("cannot make a directory for the job: ", std::strerror(errno)));
  }
  const std::string dir = dir_template;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  std::string secret_file = dir + "/job.pem";
  if (!r.secret.empty()) {
    secret_file = r.secret;
    if (auto s = actors::load_job_secret(secret_file); !s.ok()) return fail(s.status());
  } else if (auto s = actors::make_job_secret(secret_file); !s.ok()) {
    return fail(s);
  }
  // The evaluator only reads: it is given the reader's secret alone (job_secret.h's Role).
  const std::string reader_file = dir + "/reader.pem";
  if (r.evaluator) {
    if (auto s = actors::make_reader_secret(secret_file, reader_file); !s.ok()) return fail(s);
  }

  // The chief is the first training replica; --workers counts it.
  auto ports = free_ports(r.host, static_cast<size_t>(r.ps + r.workers));
  if (!ports.ok()) return fail(ports.status());
  std::map<std::string, std::vector<std::string>> jobs;
  size_t next = 0;
  auto add = [&](TaskType type, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      jobs[estimators::task_type_name(type)].push_back(r.host + ":" +
                                                       std::to_string((*ports)[next++]));
    }
  };
  add(TaskType::kPs, r.ps);
  add(TaskType::kChief, 1);
  add(TaskType::kWorker, r.workers - 1);
  const std::string spec = cluster_json(jobs);
  if (auto s = runtime::write_file_atomic(dir + "/cluster.json", spec); !s.ok()) return fail(s);

  if (::pipe2(signal_pipe, O_CLOEXEC) != 0) return fail(runtime::unavailable("pipe"));
  struct sigaction action = {};
  action.sa_handler = &on_launcher_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &action, nullptr);

  runtime::set_log_task("cluster");
  runtime::log_info("job of ", r.ps, " ps, 1 chief, ", r.workers - 1,
                    r.workers == 2 ? " worker" : " workers", r.evaluator ? ", 1 evaluator" : "",
                    r.pin ? ", pinned" : "", ": ", spec);
  auto cores = pinning(static_cast<size_t>(r.workers));
  if (!cores.ok()) return fail(cores.status());
  const Pinning pins = *cores;
  if (r.pin && pins.cores.size() < pins.replicas) {
    runtime::log_warning("--pin: ", pins.replicas, " training replicas on ", pins.cores.size(),
                         " cores: some share a core");
  }
  const int nice = pins.crowded() ? kCrowdedNice : 0;
  if (nice != 0) {
    runtime::log_info(pins.replicas, " training replicas on ", pins.cores.size(),
                      pins.cores.size() == 1 ? " core" : " cores", ": they run at nice ", nice,
                      ", so that the ps tasks answer at once");
  }
  std::vector<Task> tasks;
  auto start = [&](TaskType type, int index, const std::vector<std::string>& cmd) {
    std::vector<int> cpus;
    if (r.pin) {
      // The chief is replica 0, worker i replica i + 1.
      if (type == TaskType::kChief)
        cpus = pins.replica(0);
      else if (type == TaskType::kWorker)
        cpus = pins.replica(static_cast<size_t>(index) + 1);
      else
        cpus = pins.others();
    }
    auto t = spawn_task(self, type, index, cmd, spec,
                        type == TaskType::kEvaluator ? reader_file : secret_file, cpus,
                        type == TaskType::kPs ? 0 : nice);
    if (t.ok() && !cpus.empty()) {
      std::string list;
      for (int cpu : cpus) list += (list.empty() ? "" : ",") + std::to_string(cpu);
      runtime::log_info(t->name, " runs on core", cpus.size() > 1 ? "s " : " ", list);
    }
    if (!t.ok()) return t.status();
    tasks.push_back(std::move(*t));
    return runtime::ok_status();
  };
  runtime::Status started = runtime::ok_status();
  // Pinned replicas' calls run on their own cores (net::DataServerOptions::follow_incoming_cpu).
  const std::vector<std::string> server =
      r.pin ? std::vector<std::string>{"server", "--pin"} : std::vector<std::string>{"server"};
  for (int i = 0; i < r.ps && started.ok(); ++i) started = start(TaskType::kPs, i, server);
  for (int i = 0; i + 1 < r.workers && started.ok(); ++i) {
    started = start(TaskType::kWorker, i, r.command);
  }
  if (started.ok()) started = start(TaskType::kChief, 0, r.command);
  if (started.ok() && r.evaluator) started = start(TaskType::kEvaluator, 0, r.command);

  const int result = supervise(tasks, r.grace, started);
  for (int sig : {SIGINT, SIGTERM}) std::signal(sig, SIG_DFL);
  return result;
}

}  // namespace troupe::cli
