// TensorBoard event files: `events.out.tfevents.<seconds>.<host>` in a log directory, TFRecord
// frames of Event protos (hand-encoded: field numbers from TF's event.proto and summary.proto),
// holding the version record, scalars, histograms, images, text and the graph, so stock
// TensorBoard shows a troupe run.
//
//   auto w = EventsWriter::open("model_dir");                  // Result<unique_ptr<...>>
//   (*w)->add_scalar("loss", 0.37, /*step=*/500);
//   (*w)->add_histogram("dense/kernel", kernel, 500);
//   (*w)->add_graph(graph);
//   (*w)->add_session_log(SessionStatus::kStart, 500);       // training (re)starts at 500
//   (*w)->flush();
//
// Not thread-safe: the summary actor (summary_actor.h) owns one and serialises writes.
// Training code writes through that actor; this class is its file format.
#pragma once

#include <memory>
#include <string>

#include "runtime/graph.h"
#include "runtime/record_io.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::estimators {

// The serialised Event protos, exposed for tests against the reference's vectors.
std::string version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const runtime::Tensor& values);
std::string graph_event(double wall_time, const runtime::Graph& graph);
// Summary.Image { height, width, colorspace, encoded_image_string }: PNG bytes of an image of
// height x width x channels.
std::string image_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& png, int64_t height, int64_t width, int64_t channels);
// The text plugin's tensor summary: a DT_STRING TensorProto of `strings`' shape and values.
std::string text_event(double wall_time, int64_t step, const std::string& tag,
                       const runtime::Tensor& strings);
// SessionLog { status = 1; checkpoint_path = 2; } (TF's SessionStatus values).
enum class SessionStatus { kStart = 1, kStop = 2, kCheckpoint = 3 };
std::string session_log_event(double wall_time, int64_t step, SessionStatus status,
                              const std::string& checkpoint_path = "");

class EventsWriter {
 public:
  // Creates `logdir` if needed and a new events file in it, starting with the version record.
  static runtime::Result<std::unique_ptr<EventsWriter>> open(const std::string& logdir);

  runtime::Status add_scalar(const std::string& tag, double value, int64_t step);
  // A histogram of a numeric tensor's elements, in TensorBoard's default exponential buckets.
  runtime::Status add_histogram(const std::string& tag, const runtime::Tensor& values,
                                int64_t step);
  runtime::Status add_graph(const runtime::Graph& graph);
  // The first max_outputs images of [batch, h, w, 1 | 3 | 4] as PNGs (summary::image's scaling),
  // tagged "tag/image/i" ("tag/image" for one).
  runtime::Status add_images(const std::string& tag, const runtime::Tensor& images,
                             int64_t max_outputs, int64_t step);
  runtime::Status add_text(const std::string& tag, const runtime::Tensor& strings, int64_t step);
  // A START at step N tells TensorBoard that training (re)started there: it drops what an
  // interrupted run logged for later steps, so resumed curves do not double back.
  runtime::Status add_session_log(SessionStatus status, int64_t step,
                                  const std::string& checkpoint_path = "");
  runtime::Status flush();
  const std::string& path() const { return writer_.path(); }

 private:
  explicit EventsWriter(runtime::RecordWriter writer) : writer_(std::move(writer)) {}
  runtime::RecordWriter writer_;
};

double wall_time_now();

}  // namespace troupe::estimators
