#include "estimators/hooks.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "estimators/best_value.h"
#include "estimators/step_timer.h"
#include "runtime/log.h"
#include "runtime/record_io.h"

#include "estimators/summary/summary_actor.h"

namespace troupe::estimators {

using runtime::Status;
using Clock = std::chrono::steady_clock;

int HookSetup::fetch(runtime::Output o) {
  fetches_.push_back(o);
  return static_cast<int>(fetches_.size()) - 1;
}

int HookSetup::fetch_every(runtime::Output o, int64_t every) {
  if (mode_ != Mode::kTrain || every < 1) return fetch(o);
  occasional_.push_back(o);
  occasional_every_.push_back(every);
  return kOccasional + static_cast<int>(occasional_.size()) - 1;
}

const runtime::Tensor& StepContext::value(int fetch) const {
  if (fetch < HookSetup::kOccasional) return values_[offset_ + fetch];
  static const runtime::Tensor kNone;
  const size_t at = occasional_at_ + static_cast<size_t>(fetch - HookSetup::kOccasional);
  return at < values_.size() ? values_[at] : kNone;
}

runtime::Output HookSetup::find(const std::string& name) const { return graph_.find_output(name); }

namespace {

class StopAtStep : public SessionRunHook {
 public:
  StopAtStep(int64_t num_steps, int64_t last_step) : num_steps_(num_steps), last_(last_step) {}
  Status after_create_session(HookContext& ctx) override {
    if (num_steps_ > 0) last_ = ctx.global_step + num_steps_;
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (c.global_step >= last_) c.request_stop();
    return runtime::ok_status();
  }
  int64_t stop_step() const override { return last_ > 0 ? last_ : INT64_MAX; }

 private:
  int64_t num_steps_, last_;
};

class LoggingTensor : public SessionRunHook {
 public:
  LoggingTensor(std::vector<std::string> names, int64_t every)
      : names_(std::move(names)), timer_(every, 0) {}
  Status begin(HookSetup& s) override {
    for (const std::string& n : names_) {
      runtime::Output o = s.find(n);
      if (!o.valid()) return runtime::invalid_argument("LoggingTensorHook: no tensor '", n, "'");
      fetches_.push_back(s.fetch(o));
    }
    return runtime::ok_status();
  }
  Status after_create_session(HookContext& ctx) override {
    timer_.reset(ctx.global_step);
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (!timer_.should_trigger(c.global_step)) return runtime::ok_status();
    timer_.update(c.global_step);
    std::string line;
    for (size_t i = 0; i < names_.size(); ++i) {
      line += (i ? ", " : "") + names_[i] + " = " + c.value(fetches_[i]).debug_string(8);
    }
    runtime::log_info(line, " (step ", c.global_step, ")");
    return runtime::ok_status();
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> fetches_;
  SecondOrStepTimer timer_;
};

class NanTensor : public SessionRunHook {
 public:
  explicit NanTensor(bool fail) : fail_(fail) {}
  Status begin(HookSetup& s) override {
    if (s.loss().valid()) loss_ = s.fetch(s.loss());
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (loss_ < 0) return runtime::ok_status();
    const double v = c.value(loss_).scalar_as_double();
    if (std::isfinite(v)) return runtime::ok_status();
    if (fail_) {
      return runtime::invalid_argument("NaN loss during training (step ", c.global_step,
                                       "): the model diverged; lower the learning rate");
    }
    runtime::log_warning("the loss is ", v, " at step ", c.global_step, "; stopping");
    c.request_stop();
    return runtime::ok_status();
  }

 private:
  bool fail_;
  int loss_ = -1;
};

class FeedFn : public SessionRunHook {
 public:
  explicit FeedFn(std::function<Status(runtime::FeedList*)> f) : f_(std::move(f)) {}
  Status begin(HookSetup& s) override {
    s.add_feed(f_);
    return runtime::ok_status();
  }

 private:
  std::function<Status(runtime::FeedList*)> f_;
};

class FinalOps : public SessionRunHook {
 public:
  FinalOps(std::vector<std::string> names,
           std::function<void(const std::map<std::string, runtime::Tensor>&)> done)
      : names_(std::move(names)), done_(std::move(done)) {}
  Status begin(HookSetup& s) override {
    for (const std::string& n : names_) {
      runtime::Output o = s.find(n);
      if (!o.valid()) return runtime::invalid_argument("FinalOpsHook: no tensor '", n, "'");
      fetches_.push_back(s.fetch(o));
    }
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    for (size_t i = 0; i < names_.size(); ++i) last_[names_[i]] = c.value(fetches_[i]);
    return runtime::ok_status();
  }
  Status end(HookContext&) override {
    if (done_) done_(last_);
    return runtime::ok_status();
  }

 private:
  std::vector<std::string> names_;
  std::vector<int> fetches_;
  std::map<std::string, runtime::Tensor> last_;
  std::function<void(const std::map<std::string, runtime::Tensor>&)> done_;
};

class CheckpointSaver : public SessionRunHook {
 public:
  CheckpointSaver(runtime::CheckpointManager* m, int64_t steps, double secs,
                  std::vector<CheckpointListener> listeners, GatherFn gather)
      : manager_(m),
        timer_(steps, secs),
        listeners_(std::move(listeners)),
        gather_(std::move(gather)) {}
  Status after_create_session(HookContext& ctx) override {
    timer_.reset(ctx.global_step);
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (timer_.should_trigger(c.global_step)) c.request_sync();
    return runtime::ok_status();
  }
  Status at_sync(HookContext& ctx) override {
    return timer_.should_trigger(ctx.global_step) ? save(ctx) : runtime::ok_status();
  }
  Status end(HookContext& ctx) override {
    return ctx.global_step == timer_.last_step() ? runtime::ok_status() : save(ctx);
  }
  int64_t next_sync_step(int64_t) const override { return timer_.next_step(); }
  bool blocks() const override { return gather_ != nullptr; }

 private:
  Status save(HookContext& ctx) {
    int64_t step = ctx.global_step;
    if (gather_) {
      TROUPE_RETURN_IF_ERROR(gather_(ctx.variables).with_context("gathering the model to save"));
      step = ctx.variables.read_int64_scalar("global_step").value_or(step);
    }
    for (auto& l : listeners_) {
      if (l.before_save) l.before_save(step);
    }
    TROUPE_ASSIGN_OR_RETURN(std::string path, manager_->save(step, ctx.variables));
    runtime::log_info("saved checkpoint for step ", step, ": ", path);
    for (auto& l : listeners_) {
      if (l.after_save) l.after_save(step, path);
    }
    timer_.update(std::max(step, ctx.global_step));
    return runtime::ok_status();
  }
  runtime::CheckpointManager* manager_;
  SecondOrStepTimer timer_;
  std::vector<CheckpointListener> listeners_;
  GatherFn gather_;
};

}  // namespace

runtime::Status write_projector(const std::string& logdir, const runtime::Graph& graph,
                                const runtime::VariableStore& variables) {
  static const std::string kTable = "embedding_weights";
  std::map<std::string, std::map<int, runtime::Tensor>> tables;  // name -> part -> rows
  for (const std::string& name : variables.names()) {
    std::string table = name;
    int part = 0;
    if (const size_t at = name.rfind("/part_"); at != std::string::npos) {
      table = name.substr(0, at);
      part = std::atoi(name.c_str() + at + 6);
    }
    if (table.size() < kTable.size() ||
        table.compare(table.size() - kTable.size(), kTable.size(), kTable) != 0) {
      continue;
    }
    auto rows = variables.read(name);
    if (rows.ok() && rows->rank() == 2 && rows->dtype() == runtime::DType::kFloat32) {
      tables[table][part] = *rows;
    }
  }
  if (tables.empty()) return runtime::ok_status();
  std::error_code ec;
  std::filesystem::create_directories(logdir + "/projector", ec);
  std::string config;
  for (const auto& [table, parts] : tables) {
    std::string file = table;
    std::replace(file.begin(), file.end(), '/', '_');
    std::string rows_text, labels_text;
    int64_t rows = 0, width = 0;
    for (const auto& [part, t] : parts) {
      width = t.dim(1);
      for (int64_t r = 0; r < t.dim(0); ++r, ++rows) {
        for (int64_t c = 0; c < width; ++c) {
          rows_text += (c ? "\t" : "") + std::to_string(t.data<float>()[r * width + c]);
        }
        rows_text += "\n";
      }
    }
    TROUPE_RETURN_IF_ERROR(
        runtime::write_file_atomic(logdir + "/projector/" + file + ".tsv", rows_text));
    config += "embeddings {\n  tensor_name: \"" + table + "\"\n  tensor_path: \"projector/" + file +
              ".tsv\"\n";
    const int labels = graph.find(table + "/metadata");
    if (labels >= 0 && graph.node(labels).attrs.count("value")) {
      const auto& value = graph.node(labels).attr<runtime::Tensor>("value");
      if (value.dtype() == runtime::DType::kString && value.num_elements() == rows) {
        for (int64_t r = 0; r < rows; ++r) labels_text += value.data<std::string>()[r] + "\n";
        TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(
            logdir + "/projector/" + file + ".metadata.tsv", labels_text));
        config += "  metadata_path: \"projector/" + file + ".metadata.tsv\"\n";
      }
    }
    config += "  tensor_shape: " + std::to_string(rows) +
              "\n  tensor_shape: " + std::to_string(width) + "\n}\n";
  }
  return runtime::write_file_atomic(logdir + "/projector_config.pbtxt", config);
}

void write_summary(const SummaryWriter& w, const ops::summary::Marked& m,
                   const runtime::Tensor& value, int64_t step) {
  switch (m.kind) {
    case ops::summary::Kind::kScalar:
      w.scalar(m.tag, value.scalar_as_double(), step);
      break;
    case ops::summary::Kind::kHistogram:
      w.histogram(m.tag, value, step);
      break;
    case ops::summary::Kind::kImage:
      w.images(m.tag, value, m.max_outputs, step);
      break;
    case ops::summary::Kind::kText:
      w.text(m.tag, value, step);
      break;
  }
}

namespace {

class SummarySaver : public SessionRunHook {
 public:
  SummarySaver(const SummaryWriter& w, int64_t every)
      : writer_(w), every_(every), timer_(every, 0) {}
  Status begin(HookSetup& s) override {
    if (s.loss().valid()) loss_ = s.fetch(s.loss());
    if (s.learning_rate().valid()) learning_rate_ = s.fetch(s.learning_rate());
    for (const ops::summary::Marked& m : ops::summary::summaries(s.graph())) {
      marked_.push_back({m, s.fetch_every(m.output, every_)});
    }
    graph_ = &s.graph();
    return runtime::ok_status();
  }
  Status after_create_session(HookContext& ctx) override {
    timer_.reset(ctx.global_step);
    writer_.session_log(SessionStatus::kStart, ctx.global_step);
    if (!graph_written_) {
      graph_written_ = true;
      writer_.graph(std::make_shared<const runtime::Graph>(*graph_));
    }
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    if (!timer_.should_trigger(c.global_step)) return runtime::ok_status();
    // The model_fn's summaries come with the steps whose global step is a multiple of every_
    // (fetch_every): the first such step once due writes everything.
    if (!marked_.empty() && !c.value(marked_[0].second).valid()) return runtime::ok_status();
    if (loss_ >= 0) writer_.scalar("loss", c.value(loss_).scalar_as_double(), c.global_step);
    if (learning_rate_ >= 0) {
      writer_.scalar("learning_rate", c.value(learning_rate_).scalar_as_double(), c.global_step);
    }
    const Elapsed since = timer_.update(c.global_step);
    if (since.seconds > 0 && since.steps > 0) {
      writer_.scalar("global_step/sec", since.steps / since.seconds, c.global_step);
    }
    for (const auto& [m, fetched] : marked_) {
      write_summary(writer_, m, c.value(fetched), c.global_step);
    }
    return runtime::ok_status();
  }
  Status at_sync(HookContext& ctx) override {
    for (const std::string& name : ctx.variables.names()) {
      auto t = ctx.variables.read(name);
      if (t.ok() && runtime::is_floating(t->dtype()) && name.find('/') != std::string::npos &&
          t->num_elements() > 1) {
        writer_.histogram(name, *t, ctx.global_step);
      }
    }
    return runtime::ok_status();
  }
  Status end(HookContext& ctx) override {
    TROUPE_RETURN_IF_ERROR(at_sync(ctx));
    if (graph_ != nullptr) {
      TROUPE_RETURN_IF_ERROR(write_projector(
          std::filesystem::path(writer_.path()).parent_path().string(), *graph_, ctx.variables));
    }
    return writer_.flush();
  }

 private:
  SummaryWriter writer_;
  int64_t every_;
  SecondOrStepTimer timer_;
  int loss_ = -1;
  int learning_rate_ = -1;
  std::vector<std::pair<ops::summary::Marked, int>> marked_;  // the model_fn's, and its fetch
  const runtime::Graph* graph_ = nullptr;
  bool graph_written_ = false;
};

// TF's step log, or on a terminal a progress bar with steps/s, loss and ETA.
class StepCounter : public SessionRunHook {
 public:
  StepCounter(int64_t every, int64_t last) : timer_(every, 0), last_(last), tty_(::isatty(2)) {}
  Status begin(HookSetup& s) override {
    if (s.loss().valid()) loss_ = s.fetch(s.loss());
    return runtime::ok_status();
  }
  Status after_create_session(HookContext& ctx) override {
    first_step_ = ctx.global_step;
    start_ = Clock::now();
    timer_.reset(ctx.global_step);
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    const double loss = loss_ >= 0 ? c.value(loss_).scalar_as_double() : NAN;
    const auto now = Clock::now();
    if (tty_ && last_ > 0 && (c.global_step % 10 == 0 || c.global_step == last_)) {
      const double secs = std::chrono::duration<double>(now - start_).count();
      const double rate = secs > 0 ? (c.global_step - first_step_) / secs : 0;
      const double left = rate > 0 ? (last_ - c.global_step) / rate : 0;
      const int width = 30;
      const int done = static_cast<int>(width * std::min(1.0, double(c.global_step) / last_));
      std::fprintf(stderr, "\r[%s%s] %lld/%lld %.1f steps/s loss %.4f ETA %dm%02ds ",
                   std::string(done, '=').c_str(), std::string(width - done, ' ').c_str(),
                   static_cast<long long>(c.global_step), static_cast<long long>(last_), rate, loss,
                   static_cast<int>(left) / 60, static_cast<int>(left) % 60);
      if (c.global_step == last_) std::fprintf(stderr, "\n");
      return runtime::ok_status();
    }
    if (tty_ && last_ > 0) return runtime::ok_status();
    if (!timer_.should_trigger(c.global_step)) return runtime::ok_status();
    const Elapsed since = timer_.update(c.global_step);
    char timing[64];
    std::snprintf(timing, sizeof timing, "%.3f sec", since.seconds);
    runtime::log_info("loss = ", loss, ", step = ", c.global_step, " (", timing, ")");
    if (since.seconds > 0) runtime::log_info("global_step/sec: ", since.steps / since.seconds);
    return runtime::ok_status();
  }
  Status end(HookContext&) override {
    if (tty_ && last_ > 0) std::fprintf(stderr, "\n");
    return runtime::ok_status();
  }

 private:
  SecondOrStepTimer timer_;
  int64_t last_;
  bool tty_;
  int loss_ = -1;
  int64_t first_step_ = 0;
  Clock::time_point start_;
};

class EarlyStopping : public SessionRunHook {
 public:
  explicit EarlyStopping(EarlyStoppingOptions o)
      : o_(std::move(o)), best_({.maximize = o_.maximize, .min_delta = o_.min_delta}) {}
  Status begin(HookSetup& s) override {
    runtime::Output t = o_.tensor.empty() ? s.loss() : s.find(o_.tensor);
    if (!t.valid()) {
      return runtime::invalid_argument("EarlyStoppingHook: no tensor '",
                                       o_.tensor.empty() ? "loss" : o_.tensor, "'");
    }
    fetch_ = s.fetch(t);
    return runtime::ok_status();
  }
  Status after_run(StepContext& c) override {
    sum_ += c.value(fetch_).scalar_as_double();
    ++n_;
    if (n_ >= o_.every_steps) c.request_sync();
    return runtime::ok_status();
  }
  int64_t next_sync_step(int64_t global_step) const override {
    return global_step + std::max<int64_t>(1, o_.every_steps - n_);
  }
  Status at_sync(HookContext& ctx) override {
    if (n_ == 0) return runtime::ok_status();
    const double value = sum_ / n_;
    sum_ = 0;
    n_ = 0;
    if (best_.offer(value, ctx.global_step, ctx.variables) || best_.waited() < o_.rounds) {
      return runtime::ok_status();
    }
    runtime::log_info("early stopping at step ", ctx.global_step, ": no improvement on ",
                      best_.best(), " for ", best_.waited(), " rounds");
    if (o_.restore_best) best_.restore(ctx.variables);
    ctx.stop = true;
    return runtime::ok_status();
  }

 private:
  EarlyStoppingOptions o_;
  int fetch_ = -1;
  double sum_ = 0;
  int64_t n_ = 0;
  BestValue best_;
};

class Profiler : public SessionRunHook {
 public:
  Profiler(int64_t every, std::string dir) : every_(every), dir_(std::move(dir)) {}
  Status begin(HookSetup& s) override {
    if (every_ <= 0) return runtime::invalid_argument("ProfilerHook: every_steps must be > 0");
    s.profile_every(every_, [this](int64_t step, std::vector<actors::NodeTiming> t) {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      const std::string path = dir_ + "/timeline-" + std::to_string(step) + ".json";
      TROUPE_RETURN_IF_ERROR(runtime::write_file_atomic(path, chrome_trace(t)));
      written.push_back(path);
      return runtime::ok_status();
    });
    return runtime::ok_status();
  }
  std::vector<std::string> written;

 private:
  int64_t every_;
  std::string dir_;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string chrome_trace(const std::vector<actors::NodeTiming>& timings) {
  int64_t origin = INT64_MAX;
  for (const auto& t : timings) origin = std::min(origin, t.start_us);
  std::string out = "{\"traceEvents\": [";
  for (size_t i = 0; i < timings.size(); ++i) {
    const actors::NodeTiming& t = timings[i];
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ts\": %lld, \"dur\": %lld, \"pid\": 0, \"tid\": %llu",
                  static_cast<long long>(t.start_us - origin),
                  static_cast<long long>(t.duration_us),
                  static_cast<unsigned long long>(t.thread % 100000));
    out += std::string(i ? ",\n" : "\n") + "{\"name\": \"" + json_escape(t.node) +
           "\", \"cat\": \"" + json_escape(t.op) + "\", \"ph\": \"X\", " + buf +
           ", \"args\": {\"op\": \"" + json_escape(t.op) + "\"}}";
  }
  out += "\n], \"displayTimeUnit\": \"ms\"}\n";
  return out;
}

std::shared_ptr<SessionRunHook> profiler_hook(int64_t every_steps, std::string output_dir) {
  return std::make_shared<Profiler>(every_steps, std::move(output_dir));
}

std::shared_ptr<SessionRunHook> stop_at_step_hook(int64_t num_steps, int64_t last_step) {
  return std::make_shared<StopAtStep>(num_steps, last_step);
}
std::shared_ptr<SessionRunHook> logging_tensor_hook(std::vector<std::string> names,
                                                    int64_t every_n_iter) {
  return std::make_shared<LoggingTensor>(std::move(names), every_n_iter);
}
std::shared_ptr<SessionRunHook> nan_tensor_hook(bool fail_on_nan_loss) {
  return std::make_shared<NanTensor>(fail_on_nan_loss);
}
std::shared_ptr<SessionRunHook> feed_fn_hook(std::function<Status(runtime::FeedList*)> feed) {
  return std::make_shared<FeedFn>(std::move(feed));
}
std::shared_ptr<SessionRunHook> final_ops_hook(
    std::vector<std::string> outputs,
    std::function<void(const std::map<std::string, runtime::Tensor>&)> done) {
  return std::make_shared<FinalOps>(std::move(outputs), std::move(done));
}
std::shared_ptr<SessionRunHook> checkpoint_saver_hook(runtime::CheckpointManager* manager,
                                                      int64_t every_steps, double every_secs,
                                                      std::vector<CheckpointListener> listeners,
                                                      GatherFn gather) {
  return std::make_shared<CheckpointSaver>(manager, every_steps, every_secs, std::move(listeners),
                                           std::move(gather));
}
std::shared_ptr<SessionRunHook> summary_saver_hook(const SummaryWriter& writer,
                                                   int64_t every_steps) {
  return std::make_shared<SummarySaver>(writer, every_steps);
}
std::shared_ptr<SessionRunHook> step_counter_hook(int64_t every_steps, int64_t last_step) {
  return std::make_shared<StepCounter>(every_steps, last_step);
}
std::shared_ptr<SessionRunHook> early_stopping_hook(EarlyStoppingOptions options) {
  return std::make_shared<EarlyStopping>(std::move(options));
}

}  // namespace troupe::estimators
