// The summary writer as an actor: a detached actor that owns an EventsWriter, so that hooks on
// the training loop hand it scalars, histograms and the graph with a send and never wait for a
// disk. Writes happen in the order sent.
//
//   SummaryWriter w = SummaryWriter::open(rt, "model_dir");     // Result<SummaryWriter>
//   w.scalar("loss", 0.3, step);                                 // returns at once
//   w.histogram("dense/kernel", kernel, step);                   // the tensor is shared, not
//   copied w.flush();                                                   // waits until written
//
// A write error is kept and returned by the next flush().
#pragma once

#include <caf/all.hpp>

#include <string>

#include "actors/runtime_system.h"
#include "estimators/summary/events_writer.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::estimators {

class SummaryWriter {
 public:
  static runtime::Result<SummaryWriter> open(actors::Runtime& runtime, const std::string& logdir);
  SummaryWriter(const SummaryWriter&) = default;
  SummaryWriter& operator=(const SummaryWriter&) = default;

  void scalar(const std::string& tag, double value, int64_t step) const;
  void histogram(const std::string& tag, const runtime::Tensor& values, int64_t step) const;
  // EventsWriter::add_images and add_text, encoded on the writer's thread.
  void images(const std::string& tag, const runtime::Tensor& images, int64_t max_outputs,
              int64_t step) const;
  void text(const std::string& tag, const runtime::Tensor& strings, int64_t step) const;
  void graph(std::shared_ptr<const runtime::Graph> graph) const;
  void session_log(SessionStatus status, int64_t step,
                   const std::string& checkpoint_path = "") const;
  // Waits for every earlier write to reach the file; the first error since the last flush.
  runtime::Status flush() const;
  // Ends the actor (after what was sent before).
  void close() const;
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(actors::Runtime* runtime, caf::actor actor, std::string path)
      : runtime_(runtime), actor_(std::move(actor)), path_(std::move(path)) {}
  actors::Runtime* runtime_;
  caf::actor actor_;
  std::string path_;
};

}  // namespace troupe::estimators
