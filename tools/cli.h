// What the troupe command's subcommands share: flags parsed with Boost.Program_options, the
// one-line errors and their exit statuses (2: usage, 1: data or model), a graceful Ctrl-C, and
// the cluster a process plays a part in (TF_CONFIG, or --cluster FILE --job TYPE --task N).
//
//   auto flags = cli::parse_flags(args, {"data", "model-dir"}, {"insecure"});
//   if (!flags.ok()) return cli::usage_error(flags.status().message());
//
// Not thread-safe, but GracefulStop, whose watcher runs `stop` on a thread of its own.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "actors/job_secret.h"
#include "estimators/metrics.h"
#include "estimators/run_config.h"
#include "runtime/status.h"

namespace troupe::cli {

using Flags = std::map<std::string, std::string>;  // flag -> value ("1" for a switch given)

// `args` after the subcommand. Every name in `valued` takes a value, every one in `switches`
// none; anything else is an error naming it.
runtime::Result<Flags> parse_flags(const std::vector<std::string>& args,
                                   const std::vector<std::string>& valued,
                                   const std::vector<std::string>& switches = {});

// Exit statuses as the launchers read them (Kubeflow's ExitCode restart policy: 1-127 a
// permanent error, 128 and above one a restart may cure).
constexpr int kExitFailed = 1;       // bad data, a bad model, a secret refused
constexpr int kExitUsage = 2;        // a bad flag
constexpr int kExitRetryable = 128;  // a peer lost or not come, a deadline: Unavailable and alike

int usage_error(const std::string& what);  // one line on stderr; returns kExitUsage
// One line on stderr; returns kExitRetryable for what a restart may cure, else kExitFailed.
int fail(const runtime::Status& s);
// One JSON line of metrics on stdout: accuracy and loss first, then global_step, then the rest
// (what train and evaluate end with, and an evaluator prints for each checkpoint).
void print_metrics(const estimators::Metrics& m);
bool to_int(const std::string& flag, const std::string& v, int64_t min, int64_t* out,
            std::string* error);

// The flags that place a process in a cluster, which every command of a cluster task takes.
extern const std::vector<std::string> kClusterFlags;

// The cluster this process is a member of: --cluster FILE (a JSON object of jobs, each a list
// of "host:port", as TF_CONFIG's "cluster") with --job and --task; else as
// --cluster-resolver (or TROUPE_CLUSTER_RESOLVER) says: tf_config (the default: TF_CONFIG),
// slurm (Slurm's step variables) or mpi (an MPI launcher's rank and --hostfile FILE), the last
// two with --ps N (the first N ranks) and --port-base P (8888); none when nothing is given.
// Errors say which flag or which part of TF_CONFIG is wrong.
runtime::Result<estimators::ClusterConfig> cluster_of(const Flags& flags);
// --secret FILE, else TROUPE_JOB_SECRET; null when neither is given.
runtime::Result<std::shared_ptr<const actors::JobSecret>> secret_of(const Flags& flags);

// Turns SIGINT and SIGTERM into a call of `stop` on a thread of its own: the handler (any thread
// may receive the signal, OpenBLAS's too) only writes a byte to a pipe, the watcher reads it.
// A second signal exits at once.
class GracefulStop {
 public:
  GracefulStop() = default;
  ~GracefulStop() { finish(); }
  GracefulStop(const GracefulStop&) = delete;
  GracefulStop& operator=(const GracefulStop&) = delete;

  void watch(std::function<void()> stop);
  // Blocks until the first SIGINT or SIGTERM: a server's main thread, which serves until then.
  void wait();
  // Before what `stop` touches is destroyed.
  void finish();
  // The first signal received (SIGINT, SIGTERM), 0 for none. A process that SIGTERM stopped
  // exits 128 + 15 when it has stopped gracefully: the cluster's launcher (Kubernetes draining a
  // node, Slurm preempting) asked it to go, and a restart goes on from its checkpoint; Ctrl-C is
  // a user's own stop, and ends as the command would.
  static int received() { return received_; }

 private:
  static void on_signal(int sig);
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
  static std::atomic<bool> signalled_;
  static std::atomic<int> received_;
  static int write_end_;
};

// The subcommands; each returns the process's exit status.
int train(const std::vector<std::string>& args);
int evaluate(const std::vector<std::string>& args);
int predict(const std::vector<std::string>& args);
int export_model(const std::vector<std::string>& args);
int search(const std::vector<std::string>& args);
int serve(const std::vector<std::string>& args);
int server(const std::vector<std::string>& args);
// A ps task until it is stopped or the chief has finished: `troupe server`'s, and `troupe
// train`'s when its cluster makes it a ps (the operators start every replica with one command).
// Without a job secret, an error when `secret_required`, else a warning.
int serve_ps(const estimators::ClusterConfig& cluster, const Flags& flags, bool secret_required);
int cluster(const std::vector<std::string>& args, const std::string& self);
int secret(const std::vector<std::string>& args);
int convert(const std::vector<std::string>& args);

}  // namespace troupe::cli
