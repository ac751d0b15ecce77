#include "tools/cli.h"

#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "estimators/cluster_resolver.h"
#include "runtime/log.h"

namespace troupe::cli {

namespace po = boost::program_options;

runtime::Result<Flags> parse_flags(const std::vector<std::string>& args,
                                   const std::vector<std::string>& valued,
                                   const std::vector<std::string>& switches) {
  po::options_description known;
  for (const std::string& name : valued)
    known.add_options()(name.c_str(), po::value<std::string>());
  for (const std::string& name : switches) known.add_options()(name.c_str(), po::bool_switch());
  po::variables_map vm;
  try {
    // No abbreviations: --epoch must not quietly mean --epochs.
    const int style = po::command_line_style::unix_style ^ po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(known).style(style).run(), vm);
  } catch (const po::unknown_option& e) {
    return runtime::invalid_argument("unknown flag ", e.get_option_name());
  } catch (const po::too_many_positional_options_error&) {
    for (const std::string& a : args) {
      if (a.rfind("-", 0) != 0) return runtime::invalid_argument("unexpected argument '", a, "'");
    }
    return runtime::invalid_argument("unexpected argument");
  } catch (const po::error& e) {
    return runtime::invalid_argument(e.what());
  }
  Flags flags;
  for (const auto& [name, value] : vm) {
    if (value.value().type() == typeid(bool)) {
      if (value.as<bool>()) flags[name] = "1";
    } else {
      flags[name] = value.as<std::string>();
    }
  }
  return flags;
}

int usage_error(const std::string& what) {
  std::fprintf(stderr, "troupe: %s (troupe --help shows the usage)\n", what.c_str());
  return kExitUsage;
}

void print_metrics(const estimators::Metrics& m) {
  std::string line = "{";
  auto add = [&](const std::string& k, double v, bool integer) {
    char buf[128];
    if (integer) {
      std::snprintf(buf, sizeof buf, "%s\"%s\": %lld", line.size() > 1 ? ", " : "", k.c_str(),
                    static_cast<long long>(v));
    } else {
      std::snprintf(buf, sizeof buf, "%s\"%s\": %.4f", line.size() > 1 ? ", " : "", k.c_str(), v);
    }
    line += buf;
  };
  for (const char* k : {"accuracy", "loss"}) {
    if (m.count(k)) add(k, m.at(k), false);
  }
  add("global_step", m.count("global_step") ? m.at("global_step") : 0, true);
  for (const auto& [k, v] : m) {
    if (k != "accuracy" && k != "loss" && k != "global_step" && k != "average_loss")
      add(k, v, k == "restarts");
  }
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

int fail(const runtime::Status& s) {
  std::fprintf(stderr, "troupe: %s\n", s.to_string().c_str());
  switch (s.code()) {
    case runtime::Code::kUnavailable:
    case runtime::Code::kDeadlineExceeded:
    case runtime::Code::kAborted:
      return kExitRetryable;
    default:
      return kExitFailed;
  }
}

bool to_int(const std::string& flag, const std::string& v, int64_t min, int64_t* out,
            std::string* error) {
  try {
    size_t used = 0;
    *out = std::stoll(v, &used);
    if (used == v.size() && *out >= min) return true;
  } catch (...) {
  }
  *error = "--" + flag + ": '" + v + "' is not an integer >= " + std::to_string(min);
  return false;
}

const std::vector<std::string> kClusterFlags = {"cluster",          "job", "task",      "secret",
                                                "cluster-resolver", "ps",  "port-base", "hostfile"};

namespace {

// --cluster-resolver slurm|mpi: the cluster as the batch system's launcher describes it.
runtime::Result<estimators::ClusterConfig> resolved_cluster(const Flags& flags,
                                                            const std::string& resolver) {
  estimators::LauncherJobs jobs;
  std::string error;
  int64_t n = 0;
  if (flags.count("ps")) {
    if (!to_int("ps", flags.at("ps"), 0, &n, &error)) return runtime::invalid_argument(error);
    jobs.ps = static_cast<int>(std::min<int64_t>(n, 1 << 20));
  }
  if (flags.count("port-base")) {
    if (!to_int("port-base", flags.at("port-base"), 1, &n, &error) || n > 65535) {
      return runtime::invalid_argument("--port-base: '", flags.at("port-base"), "' is not a port");
    }
    jobs.port_base = static_cast<uint16_t>(n);
  }
  const estimators::Env env = [](const char* name) { return std::getenv(name); };
  if (resolver == "slurm") return estimators::slurm_cluster(env, jobs);
  const auto hostfile = flags.find("hostfile");
  return estimators::mpi_cluster(env, hostfile == flags.end() ? "" : hostfile->second, jobs);
}

}  // namespace

runtime::Result<estimators::ClusterConfig> cluster_of(const Flags& flags) {
  const bool has_file = flags.count("cluster") > 0;
  std::string resolver = flags.count("cluster-resolver") ? flags.at("cluster-resolver") : "";
  if (resolver.empty() && std::getenv("TROUPE_CLUSTER_RESOLVER")) {
    resolver = std::getenv("TROUPE_CLUSTER_RESOLVER");
  }
  if (resolver != "" && resolver != "tf_config" && resolver != "slurm" && resolver != "mpi") {
    return runtime::invalid_argument("--cluster-resolver: '", resolver,
                                     "' is not tf_config, slurm or mpi");
  }
  const bool launched = resolver == "slurm" || resolver == "mpi";
  for (const char* f : {"ps", "port-base", "hostfile"}) {
    if (flags.count(f) && !launched) {
      return runtime::invalid_argument("--", f, " goes with --cluster-resolver slurm or mpi");
    }
  }
  if (launched && (has_file || flags.count("job") || flags.count("task"))) {
    return runtime::invalid_argument("--cluster-resolver ", resolver,
                                     " places this task itself: no --cluster, --job or --task");
  }
  if (launched) return resolved_cluster(flags, resolver);
  if (!has_file) {
    if (flags.count("job") || flags.count("task")) {
      return runtime::invalid_argument("--job and --task go with --cluster FILE");
    }
    return estimators::parse_tf_config(std::getenv("TF_CONFIG"));
  }
  if (!flags.count("job") || !flags.count("task")) {
    return runtime::invalid_argument("--cluster needs --job TYPE and --task N");
  }
  const std::string& job = flags.at("job");
  int64_t task = 0;
  std::string error;
  if (!to_int("task", flags.at("task"), 0, &task, &error)) return runtime::invalid_argument(error);
  if (auto type = estimators::parse_task_type(job); !type.ok()) {
    return type.status().with_context("--job");
  }
  const std::string path = flags.at("cluster");
  std::ifstream in(path);
  if (!in) return runtime::not_found("--cluster ", path, ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = "{\"cluster\": " + text.str() + ", \"task\": {\"type\": \"" + job +
                           "\", \"index\": " + std::to_string(task) + "}}";
  auto config = estimators::parse_tf_config(json.c_str());
  if (!config.ok()) return config.status().with_context("--cluster " + path);
  return config;
}

runtime::Result<std::shared_ptr<const actors::JobSecret>> secret_of(const Flags& flags) {
  auto it = flags.find("secret");
  if (it != flags.end()) return actors::load_job_secret(it->second);
  return actors::job_secret_from_env();
}

std::atomic<bool> GracefulStop::signalled_{false};
std::atomic<int> GracefulStop::received_{0};
int GracefulStop::write_end_ = -1;

void GracefulStop::watch(std::function<void()> stop) {
  if (::pipe(pipe_) != 0) return;  // no graceful stop then; Ctrl-C still ends the process
  write_end_ = pipe_[1];
  struct sigaction action = {};
  action.sa_handler = &GracefulStop::on_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) sigaction(sig, &action, nullptr);
  watcher_ = std::thread([this, stop = std::move(stop)] {
    char sig = 0;
    if (::read(pipe_[0], &sig, 1) != 1 || sig == 0) return;
    runtime::log_info(sig == SIGINT ? "interrupted" : "terminated", " (again to quit now)");
    stop();
  });
}

void GracefulStop::wait() {
  std::mutex mu;
  std::condition_variable signalled;
  bool stop = false;
  watch([&] {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    signalled.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  signalled.wait(lock, [&] { return stop; });
}

void GracefulStop::finish() {
  if (!watcher_.joinable()) return;
  for (int sig : {SIGINT, SIGTERM}) std::signal(sig, SIG_DFL);
  const char none = 0;
  if (::write(pipe_[1], &none, 1) != 1) {
    // The watcher may have read a signal's byte already; it ends by itself then.
  }
  watcher_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void GracefulStop::on_signal(int sig) {
  if (signalled_.exchange(true)) ::_exit(128 + sig);
  received_ = sig;
  const char byte = static_cast<char>(sig);
  if (::write(write_end_, &byte, 1) != 1) ::_exit(128 + sig);
}

}  // namespace troupe::cli
