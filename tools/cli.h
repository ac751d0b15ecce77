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

int usage_error(const std::string& what);  // one line on stderr; returns 2
int fail(const runtime::Status& s);        // one line on stderr; returns 1
// One JSON line of metrics on stdout: accuracy and loss first, then global_step, then the rest
// (what train and evaluate end with, and an evaluator prints for each checkpoint).
void print_metrics(const estimators::Metrics& m);
bool to_int(const std::string& flag, const std::string& v, int64_t min, int64_t* out,
            std::string* error);

// The cluster this process is a member of: --cluster FILE (a JSON object of jobs, each a list
// of "host:port", as TF_CONFIG's "cluster") with --job and --task, else TF_CONFIG; none when
// neither is given. Errors say which flag or which part of TF_CONFIG is wrong.
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

 private:
  static void on_signal(int sig);
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
  static std::atomic<bool> signalled_;
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
int cluster(const std::vector<std::string>& args, const std::string& self);
int secret(const std::vector<std::string>& args);
int convert(const std::vector<std::string>& args);

}  // namespace troupe::cli
