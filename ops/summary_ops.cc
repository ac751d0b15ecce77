#include "ops/summary_ops.h"

#include "ops/op_def_names.h"

namespace troupe::ops {

namespace {

Status marked(InferenceContext& c) {
  if (c.attr<std::string>("tag").empty()) return c.error("a summary needs a tag");
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return runtime::ok_status();
}

}  // namespace

TROUPE_REGISTER_OP(ScalarSummary)
    .input("x")
    .output("y")
    .attr("tag", std::string())
    .shape_fn([](InferenceContext& c) -> Status {
      const Shape& s = c.input_shape(0);
      if (!runtime::is_numeric(c.input_dtype(0)) || (s.fully_defined() && s.num_elements() != 1)) {
        return c.error("a scalar summary takes one number, got ",
                       runtime::dtype_name(c.input_dtype(0)), " ", s);
      }
      return marked(c);
    })
    .no_gradient()
    .doc("y = x, written to TensorBoard as a scalar under `tag` (tf.summary.scalar)");

TROUPE_REGISTER_OP(HistogramSummary)
    .input("x")
    .output("y")
    .attr("tag", std::string())
    .shape_fn([](InferenceContext& c) -> Status {
      if (!runtime::is_numeric(c.input_dtype(0))) {
        return c.error("a histogram summary takes numbers, got ",
                       runtime::dtype_name(c.input_dtype(0)));
      }
      return marked(c);
    })
    .no_gradient()
    .doc("y = x, written to TensorBoard as a histogram under `tag` (tf.summary.histogram)");

TROUPE_REGISTER_OP(ImageSummary)
    .input("images")
    .output("y")
    .attr("tag", std::string())
    .attr("max_outputs", int64_t{3})
    .shape_fn([](InferenceContext& c) -> Status {
      const Shape& s = c.input_shape(0);
      if (!runtime::is_numeric(c.input_dtype(0))) {
        return c.error("an image summary takes numbers, got ",
                       runtime::dtype_name(c.input_dtype(0)));
      }
      if (s.rank_known() &&
          (s.rank() != 4 || (s.dim(3) >= 0 && s.dim(3) != 1 && s.dim(3) != 3 && s.dim(3) != 4))) {
        return c.error("an image summary takes [batch, height, width, 1, 3 or 4], not ", s);
      }
      if (c.attr<int64_t>("max_outputs") < 1) return c.error("max_outputs must be positive");
      return marked(c);
    })
    .no_gradient()
    .doc("y = images, the first max_outputs written to TensorBoard as PNGs (tf.summary.image)");

TROUPE_REGISTER_OP(TextSummary)
    .input("strings")
    .output("y")
    .attr("tag", std::string())
    .shape_fn([](InferenceContext& c) -> Status {
      if (c.input_dtype(0) != DType::kString) {
        return c.error("a text summary takes strings, got ", runtime::dtype_name(c.input_dtype(0)));
      }
      return marked(c);
    })
    .no_gradient()
    .doc("y = strings, written to TensorBoard's Text tab under `tag` (tf.summary.text)");

namespace summary {

Output scalar(GraphBuilder& b, const std::string& tag, Output x) {
  return b.add("ScalarSummary", {x}, {{"tag", tag}}, tag + "/summary");
}
Output histogram(GraphBuilder& b, const std::string& tag, Output x) {
  return b.add("HistogramSummary", {x}, {{"tag", tag}}, tag + "/summary");
}
Output image(GraphBuilder& b, const std::string& tag, Output images, int64_t max_outputs) {
  return b.add("ImageSummary", {images}, {{"tag", tag}, {"max_outputs", max_outputs}},
               tag + "/summary");
}
Output text(GraphBuilder& b, const std::string& tag, Output strings) {
  return b.add("TextSummary", {strings}, {{"tag", tag}}, tag + "/summary");
}

std::vector<Marked> summaries(const runtime::Graph& graph) {
  static const std::pair<const char*, Kind> kOps[] = {{"ScalarSummary", Kind::kScalar},
                                                      {"HistogramSummary", Kind::kHistogram},
                                                      {"ImageSummary", Kind::kImage},
                                                      {"TextSummary", Kind::kText}};
  std::vector<Marked> out;
  for (int id = 0; id < graph.num_nodes(); ++id) {
    const runtime::Node& n = graph.node(id);
    for (const auto& [op, kind] : kOps) {
      if (n.op != op) continue;
      out.push_back({kind, n.attr<std::string>("tag"),
                     kind == Kind::kImage ? n.attr<int64_t>("max_outputs") : 0, Output{id, 0}});
    }
  }
  return out;
}

}  // namespace summary
}  // namespace troupe::ops
