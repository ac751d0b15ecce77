#include "estimators/summary/summary_actor.h"

#include <memory>

#include "actors/messages.h"
#include "estimators/summary/events_writer.h"

namespace troupe::estimators {

using runtime::Status;

namespace {

using scalar_atom = caf::atom_constant<caf::atom("scalar")>;
using histo_atom = caf::atom_constant<caf::atom("histo")>;
using graph_atom = caf::atom_constant<caf::atom("graph")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using session_atom = caf::atom_constant<caf::atom("session")>;
using image_atom = caf::atom_constant<caf::atom("image")>;
using text_atom = caf::atom_constant<caf::atom("text")>;

// A histogram's, images' or text's tensor (shared, not copied) and where it goes.
struct TensorSummary {
  std::string tag;
  runtime::Tensor values;
  int64_t step = 0;
  int64_t max_outputs = 0;  // images
};
struct GraphDef {
  std::shared_ptr<const runtime::Graph> graph;
};

}  // namespace
}  // namespace troupe::estimators

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::TensorSummary)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::estimators::GraphDef)

namespace troupe::estimators {
namespace {

struct WriterState {
  std::unique_ptr<EventsWriter> writer;
  Status error;
};

caf::behavior summary_actor(caf::stateful_actor<WriterState>* self,
                            std::shared_ptr<std::unique_ptr<EventsWriter>> writer) {
  self->state.writer = std::move(*writer);
  auto keep = [self](Status s) {
    if (!s.ok() && self->state.error.ok()) self->state.error = s;
  };
  return {
      [self, keep](scalar_atom, const std::string& tag, double value, int64_t step) {
        keep(self->state.writer->add_scalar(tag, value, step));
      },
      [self, keep](histo_atom, const TensorSummary& h) {
        keep(self->state.writer->add_histogram(h.tag, h.values, h.step));
      },
      // PNG encoding happens here, off the training loop's thread.
      [self, keep](image_atom, const TensorSummary& i) {
        keep(self->state.writer->add_images(i.tag, i.values, i.max_outputs, i.step));
      },
      [self, keep](text_atom, const TensorSummary& t) {
        keep(self->state.writer->add_text(t.tag, t.values, t.step));
      },
      [self, keep](graph_atom, const GraphDef& g) {
        keep(self->state.writer->add_graph(*g.graph));
      },
      [self, keep](session_atom, int status, int64_t step, const std::string& path) {
        keep(self->state.writer->add_session_log(static_cast<SessionStatus>(status), step, path));
      },
      [self, keep](flush_atom) {
        keep(self->state.writer->flush());
        Status s = self->state.error;
        self->state.error = Status();
        return s;
      },
  };
}

}  // namespace

runtime::Result<SummaryWriter> SummaryWriter::open(actors::Runtime& runtime,
                                                   const std::string& logdir) {
  TROUPE_ASSIGN_OR_RETURN(auto writer, EventsWriter::open(logdir));
  const std::string path = writer->path();
  auto box = std::make_shared<std::unique_ptr<EventsWriter>>(std::move(writer));
  // Detached: file writes block, and must not hold up the CAF worker that runs the graph.
  caf::actor a = runtime.system().spawn<caf::detached>(summary_actor, box);
  return SummaryWriter(&runtime, std::move(a), path);
}

void SummaryWriter::scalar(const std::string& tag, double value, int64_t step) const {
  caf::anon_send(actor_, scalar_atom::value, tag, value, step);
}

void SummaryWriter::histogram(const std::string& tag, const runtime::Tensor& values,
                              int64_t step) const {
  caf::anon_send(actor_, histo_atom::value, TensorSummary{tag, values, step, 0});
}

void SummaryWriter::images(const std::string& tag, const runtime::Tensor& images,
                           int64_t max_outputs, int64_t step) const {
  caf::anon_send(actor_, image_atom::value, TensorSummary{tag, images, step, max_outputs});
}

void SummaryWriter::text(const std::string& tag, const runtime::Tensor& strings,
                         int64_t step) const {
  caf::anon_send(actor_, text_atom::value, TensorSummary{tag, strings, step, 0});
}

void SummaryWriter::graph(std::shared_ptr<const runtime::Graph> graph) const {
  caf::anon_send(actor_, graph_atom::value, GraphDef{std::move(graph)});
}

void SummaryWriter::session_log(SessionStatus status, int64_t step,
                                const std::string& checkpoint_path) const {
  caf::anon_send(actor_, session_atom::value, static_cast<int>(status), step, checkpoint_path);
}

Status SummaryWriter::flush() const {
  caf::scoped_actor self{runtime_->system()};
  Status result = runtime::internal_error("no answer from the summary writer");
  self->request(actor_, caf::infinite, flush_atom::value)
      .receive([&](Status& s) { result = std::move(s); },
               [&](caf::error& e) {
                 result = runtime::unavailable("summary writer: ", runtime_->system().render(e));
               });
  return result;
}

void SummaryWriter::close() const { caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown); }

}  // namespace troupe::estimators
