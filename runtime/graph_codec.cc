#include "runtime/graph_codec.h"

#include "runtime/graph_builder.h"
#include "runtime/graph_wire.h"
#include "runtime/tensor_wire.h"

namespace troupe::runtime {

namespace {

template <class T, class List>
std::vector<T> to_vector(List list) {
  std::vector<T> v;
  v.reserve(list.size());
  for (T x : list) v.push_back(x);
  return v;
}

void write_shape(const Shape& s, schema::Shape::Builder msg) {
  msg.setUnknownRank(!s.rank_known());
  auto dims = msg.initDims(s.rank_known() ? s.rank() : 0);
  for (int i = 0; s.rank_known() && i < s.rank(); ++i) dims.set(i, s.dim(i));
}

Shape read_shape(schema::Shape::Reader msg) {
  if (msg.getUnknownRank()) return Shape::unknown();
  return Shape(to_vector<int64_t>(msg.getDims()));
}

Status write_attr(const AttrValue& v, schema::AttrValue::Builder msg, capnp::Orphanage orphanage) {
  Status status;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          msg.setB(x);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          msg.setI(x);
        } else if constexpr (std::is_same_v<T, double>) {
          msg.setF(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          msg.setS(x);
        } else if constexpr (std::is_same_v<T, DType>) {
          Result<schema::DType> t = dtype_to_wire(x);
          if (t.ok()) {
            msg.setDtype(*t);
          } else {
            status = t.status();
          }
        } else if constexpr (std::is_same_v<T, Shape>) {
          write_shape(x, msg.initShape());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          auto l = msg.initInts(static_cast<unsigned>(x.size()));
          for (size_t i = 0; i < x.size(); ++i) l.set(i, x[i]);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          auto l = msg.initFloats(static_cast<unsigned>(x.size()));
          for (size_t i = 0; i < x.size(); ++i) l.set(i, x[i]);
        } else {
          status = write_tensor(x, msg.initTensor(), orphanage);
        }
      },
      v);
  return status;
}

Result<AttrValue> read_attr(schema::AttrValue::Reader msg, std::shared_ptr<const void> keep) {
  switch (msg.which()) {
    case schema::AttrValue::B:
      return AttrValue(msg.getB());
    case schema::AttrValue::I:
      return AttrValue(int64_t(msg.getI()));
    case schema::AttrValue::F:
      return AttrValue(msg.getF());
    case schema::AttrValue::S:
      return AttrValue(std::string(msg.getS().cStr()));
    case schema::AttrValue::DTYPE: {
      DType t;
      if (!dtype_from_wire(msg.getDtype(), &t)) return invalid_argument("unknown dtype");
      return AttrValue(t);
    }
    case schema::AttrValue::SHAPE:
      return AttrValue(read_shape(msg.getShape()));
    case schema::AttrValue::INTS: {
      return AttrValue(to_vector<int64_t>(msg.getInts()));
    }
    case schema::AttrValue::FLOATS: {
      return AttrValue(to_vector<double>(msg.getFloats()));
    }
    case schema::AttrValue::TENSOR: {
      TROUPE_ASSIGN_OR_RETURN(Tensor t, read_tensor(msg.getTensor(), keep));
      return AttrValue(std::move(t));
    }
  }
  return invalid_argument("unknown attribute kind");
}

}  // namespace

Status write_node(const Graph& graph, const Node& node, schema::NodeDef::Builder msg,
                  capnp::Orphanage orphanage) {
  msg.setName(node.name);
  msg.setOp(node.op);
  msg.setDevice(node.device);
  auto inputs = msg.initInputs(static_cast<unsigned>(node.inputs.size()));
  for (size_t i = 0; i < node.inputs.size(); ++i) inputs.set(i, graph.output_name(node.inputs[i]));
  auto control = msg.initControlInputs(static_cast<unsigned>(node.control_inputs.size()));
  for (size_t i = 0; i < node.control_inputs.size(); ++i) {
    control.set(i, graph.node(node.control_inputs[i]).name);
  }
  auto attrs = msg.initAttrs(static_cast<unsigned>(node.attrs.size()));
  unsigned k = 0;
  for (const auto& [name, value] : node.attrs) {
    attrs[k].setName(name);
    TROUPE_RETURN_IF_ERROR(write_attr(value, attrs[k].initValue(), orphanage)
                               .with_context("node '" + node.name + "' attribute '" + name + "'"));
    ++k;
  }
  return ok_status();
}

Status read_attrs(capnp::List<schema::Attr>::Reader attrs, std::shared_ptr<const void> keep,
                  AttrMap* out) {
  for (schema::Attr::Reader a : attrs) {
    TROUPE_ASSIGN_OR_RETURN(AttrValue v, read_attr(a.getValue(), keep));
    (*out)[a.getName().cStr()] = std::move(v);
  }
  return ok_status();
}

Status encode_graph(const Graph& graph, std::vector<char>* out) {
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<schema::GraphDef>();
  msg.setHasSeed(graph.has_seed());
  msg.setSeed(graph.seed());
  auto nodes = msg.initNodes(static_cast<unsigned>(graph.num_nodes()));
  for (int i = 0; i < graph.num_nodes(); ++i) {
    TROUPE_RETURN_IF_ERROR(write_node(graph, graph.node(i), nodes[i], builder.getOrphanage()));
  }
  auto keys = graph.collection_keys();
  auto collections = msg.initCollections(static_cast<unsigned>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    collections[i].setKey(keys[i]);
    const std::vector<int>& ids = graph.collection(keys[i]);
    auto names = collections[i].initNodes(static_cast<unsigned>(ids.size()));
    for (size_t j = 0; j < ids.size(); ++j) names.set(j, graph.node(ids[j]).name);
  }
  return write_message(builder, out);
}

Status decode_graph(std::shared_ptr<const std::vector<char>> bytes, Graph* out) {
  if (out->num_nodes() != 0) return invalid_argument("decode_graph needs an empty graph");
  Status s = read_blob(std::move(bytes), [&](capnp::MessageReader& r,
                                             std::shared_ptr<const void> keep) {
    auto msg = r.getRoot<schema::GraphDef>();
    if (msg.getHasSeed()) out->set_seed(msg.getSeed());
    GraphBuilder b(out);
    // A loop's back edges name later nodes: each Merge takes its first input there until the
    // NextIteration it names exists (Graph::set_back_edge checks it is one).
    struct BackEdge {
      std::string merge, from;
      int index;
    };
    std::vector<BackEdge> back_edges;
    for (schema::NodeDef::Reader n : msg.getNodes()) {
      const std::string name = n.getName().cStr();
      const bool merge = std::string(n.getOp().cStr()) == "Merge";
      std::vector<Output> inputs;
      for (capnp::Text::Reader in : n.getInputs()) {
        Output o = out->find_output(in.cStr());
        if (!o.valid() && merge && !inputs.empty()) {
          back_edges.push_back({name, in.cStr(), static_cast<int>(inputs.size())});
          o = inputs[0];
        }
        if (!o.valid()) {
          return invalid_argument("node '", name, "': input '", in.cStr(),
                                  "' is not an earlier node's output");
        }
        inputs.push_back(o);
      }
      std::vector<int> control;
      for (capnp::Text::Reader c : n.getControlInputs()) {
        int id = out->find(c.cStr());
        if (id < 0)
          return invalid_argument("node '", name, "': control input '", c.cStr(), "' is unknown");
        control.push_back(id);
      }
      AttrMap attrs;
      TROUPE_RETURN_IF_ERROR(
          read_attrs(n.getAttrs(), keep, &attrs).with_context("node '" + name + "'"));
      if (out->find(name) >= 0) return invalid_argument("node name '", name, "' appears twice");
      auto device = b.device(n.getDevice().cStr());
      auto deps = b.control_dependencies(control);
      b.add_node(n.getOp().cStr(), inputs, std::move(attrs), name);
      if (!b.ok()) return b.status();
    }
    for (const BackEdge& e : back_edges) {
      const Output from = out->find_output(e.from);
      if (!from.valid()) {
        return invalid_argument("node '", e.merge, "': input '", e.from, "' is no node's output");
      }
      TROUPE_RETURN_IF_ERROR(out->set_back_edge(out->find(e.merge), e.index, from));
    }
    for (schema::Collection::Reader c : msg.getCollections()) {
      for (capnp::Text::Reader name : c.getNodes()) {
        int id = out->find(name.cStr());
        if (id < 0)
          return invalid_argument("collection '", c.getKey().cStr(), "' names unknown node '",
                                  name.cStr(), "'");
        out->add_to_collection(c.getKey().cStr(), id);
      }
    }
    return ok_status();
  });
  return s.with_context("graph");
}

}  // namespace troupe::runtime
