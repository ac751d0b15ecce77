#include "runtime/frame_executor.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "runtime/executor.h"

namespace troupe::runtime {

bool is_control_flow_op(const std::string& op) {
  return op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" ||
         op == "NextIteration" || op == "LoopCond";
}

namespace {

enum class Kind { kNormal, kSwitch, kMerge, kEnter, kExit, kNextIteration, kControlTrigger };

Kind kind_of(const std::string& op) {
  if (op == "Switch") return Kind::kSwitch;
  if (op == "Merge") return Kind::kMerge;
  if (op == "Enter") return Kind::kEnter;
  if (op == "Exit") return Kind::kExit;
  if (op == "NextIteration") return Kind::kNextIteration;
  if (op == "ControlTrigger") return Kind::kControlTrigger;
  return Kind::kNormal;
}

// A value as it flows: a tensor, or dead.
struct Entry {
  Tensor value;
  bool dead = false;
};

}  // namespace

struct FrameExecutor::Item {
  int node = -1;
  const Node* def = nullptr;  // the graph's node, or what stands in for it
  Kind kind = Kind::kNormal;
  int frame = 0;      // the static frame it runs in
  int out_frame = 0;  // where its outputs go: a child's for Enter, the parent's for Exit
  int num_inputs = 0;
  int num_control = 0;
  bool constant = false;                              // an Enter whose value every iteration sees
  std::vector<std::vector<std::pair<int, int>>> out;  // per output: (item, input)
  std::vector<int> control_out;                       // items
};

struct FrameExecutor::Frame {
  std::string name;  // the Enter's frame_name; "" for the root
  int parent = -1;
  int depth = 0;
  std::vector<int> exits;  // its Exit items
};

FrameExecutor::FrameExecutor(const Graph& graph) : graph_(graph) {}
FrameExecutor::~FrameExecutor() = default;

Result<std::unique_ptr<FrameExecutor>> FrameExecutor::plan(const Graph& graph,
                                                           const std::vector<int>& nodes,
                                                           const std::vector<Output>& fed,
                                                           bool outside_controls_ran,
                                                           const StandIns& stand_ins) {
  std::unique_ptr<FrameExecutor> fx(new FrameExecutor(graph));
  fx->frames_.push_back(Frame{});
  fx->item_of_.assign(graph.num_nodes(), -1);
  for (int id : nodes) {
    fx->item_of_[id] = static_cast<int>(fx->items_.size());
    Item item;
    item.node = id;
    auto stand_in = stand_ins.find(id);
    item.def = stand_in != stand_ins.end() ? stand_in->second.get() : &graph.node(id);
    item.kind = kind_of(item.def->op);
    item.num_inputs = static_cast<int>(item.def->inputs.size());
    item.num_control = static_cast<int>(item.def->control_inputs.size());
    item.out.resize(item.def->num_outputs());
    fx->items_.push_back(std::move(item));
  }
  fx->stand_ins_ = stand_ins;
  fx->fed_ = fed;
  fx->fed_to_.resize(fed.size());
  fx->fed_at_.resize(fed.size());
  auto fed_index = [&](const Output& o) {
    auto it = std::find(fed.begin(), fed.end(), o);
    return it == fed.end() ? -1 : static_cast<int>(it - fed.begin());
  };
  std::map<std::string, int> frame_of_name;
  // In id order, every producer but a back edge's comes before its consumer: a node's frame is
  // where its first input comes from, and every other input must come from there too.
  for (int i = 0; i < static_cast<int>(fx->items_.size()); ++i) {
    Item& item = fx->items_[i];
    const Node& n = *item.def;
    int frame = -1;
    std::string from;
    auto arrive = [&](int producer_frame, const std::string& what) -> Status {
      if (frame < 0) {
        frame = producer_frame;
        from = what;
        return ok_status();
      }
      if (producer_frame == frame) return ok_status();
      return invalid_argument(n.op, " '", n.name, "': its inputs '", from, "' and '", what,
                              "' are in different frames: a value enters a loop through Enter "
                              "and leaves it through Exit");
    };
    for (int k = 0; k < item.num_inputs; ++k) {
      const Output& in = n.inputs[k];
      if (const int f = fed_index(in); f >= 0) {
        fx->fed_to_[f].push_back(i);
        fx->fed_at_[f].push_back(k);
        TROUPE_RETURN_IF_ERROR(arrive(0, graph.output_name(in)));
        continue;
      }
      const int p = fx->item_of_[in.node];
      if (p < 0) return internal_error("frames: '", n.name, "' has an input outside the plan");
      fx->items_[p].out[in.index].push_back({i, k});
      if (graph.is_back_edge(n, k)) continue;  // its frame is checked at its NextIteration
      TROUPE_RETURN_IF_ERROR(arrive(fx->items_[p].out_frame, graph.output_name(in)));
    }
    for (int c : n.control_inputs) {
      const int p = fx->item_of_[c];
      if (p < 0 && outside_controls_ran) {
        --item.num_control;
        continue;
      }
      if (p < 0) return internal_error("frames: '", n.name, "' waits for a node outside the plan");
      fx->items_[p].control_out.push_back(i);
      TROUPE_RETURN_IF_ERROR(arrive(fx->items_[p].out_frame, "^" + graph.node(c).name));
    }
    item.frame = std::max(frame, 0);
    item.out_frame = item.frame;
    if (item.kind == Kind::kEnter) {
      const std::string& name = n.attr<std::string>("frame_name");
      auto [it, added] = frame_of_name.emplace(name, static_cast<int>(fx->frames_.size()));
      if (added) {
        fx->frames_.push_back(Frame{name, item.frame, fx->frames_[item.frame].depth + 1, {}});
      } else if (fx->frames_[it->second].parent != item.frame) {
        return invalid_argument("Enter '", n.name, "': frame '", name,
                                "' is entered from two different frames");
      }
      item.out_frame = it->second;
      item.constant = n.attr<bool>("is_constant");
    } else if (item.kind == Kind::kExit) {
      if (item.frame == 0) {
        return invalid_argument("Exit '", n.name, "': not inside a loop's frame");
      }
      item.out_frame = fx->frames_[item.frame].parent;
      fx->frames_[item.frame].exits.push_back(i);
    }
    if (item.num_inputs == 0 && item.num_control == 0) fx->sources_.push_back(i);
  }
  // A back edge stays in its loop's frame.
  for (const Item& item : fx->items_) {
    const Node& n = *item.def;
    for (int k = 0; k < item.num_inputs; ++k) {
      if (!graph.is_back_edge(n, k) || fx->item_of_[n.inputs[k].node] < 0) continue;
      if (fx->items_[fx->item_of_[n.inputs[k].node]].frame != item.frame) {
        return invalid_argument(n.op, " '", n.name, "': its back edge comes from another frame");
      }
    }
  }
  return fx;
}

// One run's state: frame instances, node instances waiting for inputs, and the ready queue.
class FrameExecutor::Run {
 public:
  Run(const FrameExecutor& fx, const std::vector<Kernel>& kernels,
      const std::vector<Output>& fetches, std::vector<uint64_t>* invocations)
      : fx_(fx), kernels_(kernels), invocations_(invocations) {
    instances_.push_back(Instance{0, -1, 0, 1, {}, {}, false, {}});
    for (const Output& f : fetches) {
      if (f.node < static_cast<int>(fx.item_of_.size()) && fx.item_of_[f.node] >= 0) {
        fetched_.insert({fx.item_of_[f.node], f.index});
      }
    }
  }

  // Delivers the feeds and runs until done or a node that runs elsewhere is ready.
  Status start(std::vector<Tensor> feeds);
  // The node run elsewhere: its outputs come; the run goes on.
  Status resume(std::vector<Tensor> outputs);
  const Node* waiting() const { return elsewhere_ ? fx_.items_[elsewhere_->item].def : nullptr; }
  std::vector<Tensor>& waiting_inputs() { return waiting_inputs_; }
  Result<std::vector<Tensor>> results(const std::vector<Output>& fetches);

 private:
  struct Instance {  // a frame made for one iteration of its parent's
    int frame;
    int parent;
    int64_t parent_iter;
    int64_t iterations;                            // started so far
    std::vector<std::pair<int, Entry>> constants;  // constant Enters' values, by item
    std::set<int> exited;                          // Exit items that sent a live value
    bool done;
    std::vector<int64_t> path;  // the iterations of the frames around it, outermost first
  };
  struct Waiting {  // a node instance with some of its inputs
    std::vector<Entry> inputs;
    std::vector<bool> has;
    int missing = 0, missing_control = 0, dead = 0;
    bool control_dead = false, fired = false;
  };
  struct Ready {
    int item;
    int instance;
    int64_t iter;
    std::vector<Entry> inputs;
    bool dead;
  };
  // Ready nodes run earliest iteration first (by the iterations of every frame around them,
  // outermost first), in the order they became ready within one: an iteration's values are
  // all pushed on a gradient's stacks before the next iteration's are.
  struct Key {
    int instance;
    int64_t iter;
    uint64_t seq;  // when it became ready
  };
  struct Earlier {
    const std::vector<Instance>* instances;
    bool operator()(const Key& a, const Key& c) const {
      const std::vector<int64_t>& pa = (*instances)[a.instance].path;
      const std::vector<int64_t>& pc = (*instances)[c.instance].path;
      for (size_t i = 0; i <= pa.size() && i <= pc.size(); ++i) {
        const int64_t x = i < pa.size() ? pa[i] : a.iter, y = i < pc.size() ? pc[i] : c.iter;
        if (x != y) return x < y;
        if (i == pa.size() || i == pc.size()) break;
      }
      if (pa.size() != pc.size()) return pa.size() < pc.size();
      return a.seq < c.seq;
    }
  };
  void make_ready(Ready r);
  // A node instance: (instance, iteration, item).
  struct At {
    int instance;
    int64_t iter;
    int item;
    bool operator==(const At& o) const {
      return instance == o.instance && iter == o.iter && item == o.item;
    }
  };
  struct AtHash {
    size_t operator()(const At& a) const {
      return std::hash<int64_t>()((int64_t(a.instance) * 1000003 + a.iter) * 1000003 + a.item);
    }
  };

  void deliver(int item, int instance, int64_t iter, int input, const Entry& e);
  void maybe_fire(int item, int instance, int64_t iter, Waiting& w);
  Status process(Ready& r);
  void propagate(int item, int instance, int64_t iter, std::vector<Entry>& outs, bool dead);
  void send(int item, int instance, int64_t iter, const std::vector<Entry>& outs, bool dead);
  int child(int item, int instance, int64_t iter);
  void start_iteration(int instance, int64_t iter);
  bool close_a_frame();

  const FrameExecutor& fx_;
  const std::vector<Kernel>& kernels_;
  std::vector<uint64_t>* invocations_;
  std::vector<Instance> instances_;
  std::map<std::tuple<int, int, int64_t>, int> children_;  // (frame, parent, parent_iter)
  std::unordered_map<At, Waiting, AtHash> waiting_;
  std::map<Key, Ready, Earlier> ready_{Earlier{&instances_}};
  uint64_t readied_ = 0;
  std::set<std::pair<int, int>> fetched_;              // (item, output)
  RunStacks stacks_;                                   // a loop gradient's, for this run
  std::map<std::pair<int, int>, Entry> root_outputs_;  // the fetched ones, as the root has them
  std::vector<Tensor> feeds_;
  std::optional<Ready> elsewhere_;  // a node that runs elsewhere, ready to run
  std::vector<Tensor> waiting_inputs_;

  Status advance();
};

void FrameExecutor::Run::deliver(int item, int instance, int64_t iter, int input, const Entry& e) {
  if (instances_[instance].done) return;
  const Item& it = fx_.items_[item];
  auto [pos, added] = waiting_.try_emplace(At{instance, iter, item});
  Waiting& w = pos->second;
  if (added) {
    w.inputs.resize(it.num_inputs);
    w.has.assign(it.num_inputs, false);
    w.missing = it.num_inputs;
    w.missing_control = it.num_control;
  }
  if (w.fired) return;  // a Merge's input after it forwarded one
  if (input < 0) {
    --w.missing_control;
    w.control_dead |= e.dead;
  } else if (!w.has[input]) {
    w.has[input] = true;
    w.inputs[input] = e;
    --w.missing;
    w.dead += e.dead;
  }
  maybe_fire(item, instance, iter, w);
}

void FrameExecutor::Run::maybe_fire(int item, int instance, int64_t iter, Waiting& w) {
  const Item& it = fx_.items_[item];
  bool dead;
  if (it.kind == Kind::kMerge) {
    if (w.missing_control > 0) return;
    const bool live = w.dead < it.num_inputs - w.missing;
    if (!live && w.missing > 0) return;  // a live input may still come
    dead = !live;
  } else {
    if (w.missing > 0 || w.missing_control > 0) return;
    // A ControlTrigger orders, it carries nothing: dead inputs do not kill it.
    dead = it.kind != Kind::kControlTrigger && (w.dead > 0 || w.control_dead);
  }
  make_ready(Ready{item, instance, iter, std::move(w.inputs), dead});
  if (it.kind == Kind::kMerge) {
    w.fired = true;  // kept, so that the inputs still to come are dropped
    w.inputs.clear();
  } else {
    waiting_.erase(At{instance, iter, item});
  }
}

Status FrameExecutor::Run::process(Ready& r) {
  const Item& it = fx_.items_[r.item];
  const Node& n = *it.def;
  std::vector<Entry> outs(n.num_outputs());
  if (r.dead) {
    for (Entry& e : outs) e.dead = true;
    propagate(r.item, r.instance, r.iter, outs, true);
    return ok_status();
  }
  if (kernels_[r.item].fn == nullptr) {  // it runs elsewhere: the run waits for it
    waiting_inputs_.resize(r.inputs.size());
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      waiting_inputs_[i] = r.inputs[i].dead ? Tensor() : std::move(r.inputs[i].value);
    }
    r.inputs.clear();
    elsewhere_ = std::move(r);
    return ok_status();
  }
  KernelContext& ctx = *kernels_[r.item].ctx;
  std::vector<Tensor>& inputs = ctx.inputs();
  inputs.resize(r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    inputs[i] = r.inputs[i].dead ? Tensor() : std::move(r.inputs[i].value);
  }
  ctx.set_invocation((*invocations_)[it.node]++);
  ctx.set_stacks(&stacks_);
  Status status = run_kernel(kernels_[r.item].fn, ctx);
  ctx.set_stacks(nullptr);
  inputs.clear();
  std::vector<Tensor>& got = ctx.outputs();
  if (!status.ok()) {
    for (Tensor& t : got) t = Tensor();
    return status;
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (got[i].valid()) {
      outs[i].value = std::move(got[i]);
    } else if (it.kind == Kind::kSwitch) {
      outs[i].dead = true;  // the branch not taken
    } else {
      return internal_error(n.op, " '", n.name, "': kernel produced no output ", i);
    }
    got[i] = Tensor();
  }
  propagate(r.item, r.instance, r.iter, outs, false);
  return ok_status();
}

void FrameExecutor::Run::propagate(int item, int instance, int64_t iter, std::vector<Entry>& outs,
                                   bool dead) {
  const Item& it = fx_.items_[item];
  switch (it.kind) {
    case Kind::kEnter: {
      const int c = child(item, instance, iter);
      if (!it.constant) return send(item, c, 0, outs, dead);
      instances_[c].constants.push_back({item, outs[0]});
      for (int64_t i = 0; i < instances_[c].iterations; ++i) send(item, c, i, outs, dead);
      return;
    }
    case Kind::kExit: {
      // Dead in every iteration but the last; a frame that never sends a live value sends a
      // dead one when it closes (close_a_frame).
      if (dead) return;
      Instance& in = instances_[instance];
      in.exited.insert(item);
      return send(item, in.parent, in.parent_iter, outs, dead);
    }
    case Kind::kNextIteration: {
      if (dead) return;  // the loop ended: no next iteration
      start_iteration(instance, iter + 1);
      return send(item, instance, iter + 1, outs, dead);
    }
    default:
      return send(item, instance, iter, outs, dead);
  }
}

void FrameExecutor::Run::send(int item, int instance, int64_t iter, const std::vector<Entry>& outs,
                              bool dead) {
  const Item& it = fx_.items_[item];
  if (instance == 0) {
    for (size_t k = 0; k < outs.size(); ++k) {
      if (fetched_.count({item, static_cast<int>(k)})) {
        root_outputs_[{item, static_cast<int>(k)}] = outs[k];
      }
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    for (const auto& [to, input] : it.out[k]) deliver(to, instance, iter, input, outs[k]);
  }
  for (int to : it.control_out) deliver(to, instance, iter, -1, Entry{Tensor(), dead});
}

void FrameExecutor::Run::make_ready(Ready r) {
  ready_.emplace(Key{r.instance, r.iter, readied_++}, std::move(r));
}

int FrameExecutor::Run::child(int item, int instance, int64_t iter) {
  const int frame = fx_.items_[item].out_frame;
  auto [pos, added] =
      children_.try_emplace({frame, instance, iter}, static_cast<int>(instances_.size()));
  if (added) {
    std::vector<int64_t> path = instances_[instance].path;
    path.push_back(iter);
    instances_.push_back(Instance{frame, instance, iter, 1, {}, {}, false, std::move(path)});
  }
  return pos->second;
}

void FrameExecutor::Run::start_iteration(int instance, int64_t iter) {
  if (iter < instances_[instance].iterations) return;
  instances_[instance].iterations = iter + 1;
  // Constants are sent to each new iteration; the vector may grow meanwhile: copy first.
  const std::vector<std::pair<int, Entry>> constants = instances_[instance].constants;
  for (const auto& [item, value] : constants) {
    send(item, instance, iter, {value}, value.dead);
  }
}

// Nothing is ready: the deepest frame still open has done all it can. Its Exits that never sent
// a live value send a dead one (the loop was on a branch not taken). False when only the root
// is left.
bool FrameExecutor::Run::close_a_frame() {
  int deepest = -1;
  for (int i = 1; i < static_cast<int>(instances_.size()); ++i) {
    if (instances_[i].done) continue;
    if (deepest < 0 ||
        fx_.frames_[instances_[i].frame].depth > fx_.frames_[instances_[deepest].frame].depth) {
      deepest = i;
    }
  }
  if (deepest < 0) return false;
  instances_[deepest].done = true;
  const Instance closed = instances_[deepest];  // sending may add instances
  for (int exit : fx_.frames_[closed.frame].exits) {
    if (closed.exited.count(exit)) continue;
    std::vector<Entry> dead(1);
    dead[0].dead = true;
    send(exit, closed.parent, closed.parent_iter, dead, true);
  }
  return true;
}

Status FrameExecutor::Run::start(std::vector<Tensor> feeds) {
  feeds_ = std::move(feeds);
  for (size_t f = 0; f < feeds_.size(); ++f) {
    for (size_t j = 0; j < fx_.fed_to_[f].size(); ++j) {
      deliver(fx_.fed_to_[f][j], 0, 0, fx_.fed_at_[f][j], Entry{feeds_[f], false});
    }
  }
  for (int s : fx_.sources_) make_ready(Ready{s, 0, 0, {}, false});
  return advance();
}

Status FrameExecutor::Run::advance() {
  do {
    while (!ready_.empty()) {
      Ready r = std::move(ready_.begin()->second);
      ready_.erase(ready_.begin());
      TROUPE_RETURN_IF_ERROR(process(r));
      if (elsewhere_) return ok_status();
    }
  } while (close_a_frame());
  return ok_status();
}

Status FrameExecutor::Run::resume(std::vector<Tensor> outputs) {
  if (!elsewhere_) return internal_error("frames: resumed while waiting for no node");
  Ready r = std::move(*elsewhere_);
  elsewhere_.reset();
  waiting_inputs_.clear();
  const Node& n = *fx_.items_[r.item].def;
  TROUPE_RETURN_IF_ERROR(check_outputs(n, outputs.data(), outputs.size()));
  std::vector<Entry> outs(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) outs[i].value = std::move(outputs[i]);
  ++(*invocations_)[n.id];
  propagate(r.item, r.instance, r.iter, outs, false);
  return advance();
}

Result<std::vector<Tensor>> FrameExecutor::Run::results(const std::vector<Output>& fetches) {
  if (elsewhere_) return internal_error("frames: results asked while a node is waited for");
  std::vector<Tensor> result;
  for (const Output& f : fetches) {
    if (auto fed = std::find(fx_.fed_.begin(), fx_.fed_.end(), f); fed != fx_.fed_.end()) {
      result.push_back(feeds_[fed - fx_.fed_.begin()]);
      continue;
    }
    const std::string name = fx_.graph_.output_name(f);
    const int item = fx_.item_of_[f.node];
    auto it = item < 0 ? root_outputs_.end() : root_outputs_.find({item, f.index});
    if (it == root_outputs_.end()) {
      return internal_error("fetch '", name, "' was not computed: its inputs never came");
    }
    if (it->second.dead) {
      return invalid_argument("fetch '", name,
                              "' is dead: it is on a branch of a cond that was not taken");
    }
    result.push_back(it->second.value);
  }
  return result;
}

FrameExecutor::Resumable::~Resumable() = default;

const Node* FrameExecutor::Resumable::waiting() const {
  return status_.ok() ? run_->waiting() : nullptr;
}

std::vector<Tensor>& FrameExecutor::Resumable::waiting_inputs() { return run_->waiting_inputs(); }

Status FrameExecutor::Resumable::resume(std::vector<Tensor> outputs) {
  if (status_.ok()) status_ = run_->resume(std::move(outputs));
  return status_;
}

Result<std::vector<Tensor>> FrameExecutor::Resumable::results() {
  if (!status_.ok()) return status_;
  return run_->results(*fetches_);
}

std::unique_ptr<FrameExecutor::Resumable> FrameExecutor::start(
    const std::vector<Kernel>& kernels, std::vector<Tensor> feeds,
    const std::vector<Output>& fetches, std::vector<uint64_t>* invocations) const {
  std::unique_ptr<Resumable> r(new Resumable());
  r->run_ = std::make_unique<Run>(*this, kernels, fetches, invocations);
  r->fetches_ = &fetches;
  r->status_ = r->run_->start(std::move(feeds));
  return r;
}

Result<std::vector<Tensor>> FrameExecutor::run(const std::vector<Kernel>& kernels,
                                               const std::vector<Tensor>& feeds,
                                               const std::vector<Output>& fetches,
                                               std::vector<uint64_t>* invocations) const {
  Run run(*this, kernels, fetches, invocations);
  TROUPE_RETURN_IF_ERROR(run.start(feeds));
  if (const Node* n = run.waiting()) {
    return internal_error(n->op, " '", n->name, "' has no kernel here");
  }
  return run.results(fetches);
}

}  // namespace troupe::runtime
