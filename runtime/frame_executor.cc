#include "runtime/frame_executor.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "runtime/denormal.h"
#include "runtime/op_registry.h"

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
  std::vector<int> exits;           // its Exit items
  int64_t parallel_iterations = 1;  // iterations in flight at once (its Enters' largest)
};

FrameExecutor::FrameExecutor(const Graph& graph) : graph_(graph) {}
FrameExecutor::~FrameExecutor() = default;

Result<std::unique_ptr<FrameExecutor>> FrameExecutor::plan(const Graph& graph,
                                                           const std::vector<int>& nodes,
                                                           const std::vector<Output>& fed,
                                                           bool outside_controls_ran) {
  std::unique_ptr<FrameExecutor> fx(new FrameExecutor(graph));
  fx->frames_.push_back(Frame{});
  fx->item_of_.assign(graph.num_nodes(), -1);
  for (int id : nodes) {
    fx->item_of_[id] = static_cast<int>(fx->items_.size());
    Item item;
    item.node = id;
    item.kind = kind_of(graph.node(id).op);
    item.num_inputs = static_cast<int>(graph.node(id).inputs.size());
    item.num_control = static_cast<int>(graph.node(id).control_inputs.size());
    item.out.resize(graph.node(id).num_outputs());
    fx->items_.push_back(std::move(item));
  }
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
    const Node& n = graph.node(item.node);
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
      int64_t& window = fx->frames_[it->second].parallel_iterations;
      window = std::max(window, n.attr<int64_t>("parallel_iterations"));
    } else if (item.kind == Kind::kExit) {
      if (item.frame == 0) {
        return invalid_argument("Exit '", n.name, "': not inside a loop's frame");
      }
      item.out_frame = fx->frames_[item.frame].parent;
      fx->frames_[item.frame].exits.push_back(i);
    }
    if (item.num_inputs == 0 && item.num_control == 0) fx->sources_.push_back(i);
  }
  // Stateless plans run on up to a thread a core, as many as the widest loop lets run at once.
  bool stateful = false;
  int64_t widest = 1;
  for (const Item& item : fx->items_) stateful |= graph.node(item.node).def->stateful;
  for (const Frame& f : fx->frames_) widest = std::max(widest, f.parallel_iterations);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  fx->workers_ = stateful ? 1 : static_cast<int>(std::min<int64_t>(cores, widest));
  // A back edge stays in its loop's frame.
  for (const Item& item : fx->items_) {
    const Node& n = graph.node(item.node);
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

  Result<std::vector<Tensor>> go(const std::vector<Tensor>& feeds,
                                 const std::vector<Output>& fetches);

 private:
  // A NextIteration's value held back: its iteration would be beyond the loop's window.
  struct Deferred {
    int item;
    int64_t iter;  // the NextIteration's; the value goes to iter + 1
    std::vector<Entry> outs;
  };
  struct Instance {  // a frame made for one iteration of its parent's
    int frame;
    int parent;
    int64_t parent_iter;
    int64_t iterations;                            // started so far
    std::vector<std::pair<int, Entry>> constants;  // constant Enters' values, by item
    std::set<int> exited;                          // Exit items that sent a live value
    bool done;
    std::vector<int64_t> path;  // the iterations of the frames around it, outermost first
    // Node instances of each iteration not yet run (its child frames' among them), and the
    // earliest iteration some are left in: the window starts there.
    std::map<int64_t, int64_t> pending = {};
    int64_t earliest = 0;
    std::vector<Deferred> deferred = {};
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
  // Runs r's kernel on `ctx` (r is live); touches no state of the run but `outs`.
  Status compute(Ready& r, KernelContext& ctx, uint64_t invocation, std::vector<Entry>* outs);
  Status process(Ready& r);
  // After r's kernel: its outputs sent on, and r counted as run.
  void finish(const Ready& r, std::vector<Entry>& outs);
  Status run_parallel();
  // Counts a node instance of (instance, iter) made (+1) or run (-1); iterations with none
  // left move their loop's window on.
  void count(int instance, int64_t iter, int delta);
  void settle(int instance);
  // Sends the held-back values the window now lets through; with `all`, every one.
  bool release(int instance, bool all);
  bool release_all();
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
    count(instance, iter, +1);
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

Status FrameExecutor::Run::compute(Ready& r, KernelContext& ctx, uint64_t invocation,
                                   std::vector<Entry>* outs) {
  const Item& it = fx_.items_[r.item];
  const Node& n = fx_.graph_.node(it.node);
  outs->assign(n.num_outputs(), Entry{});
  std::vector<Tensor>& inputs = ctx.inputs();
  inputs.resize(r.inputs.size());
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    inputs[i] = r.inputs[i].dead ? Tensor() : std::move(r.inputs[i].value);
  }
  ctx.set_invocation(invocation);
  ctx.set_stacks(&stacks_);
  Status status = run_kernel(kernels_[r.item].fn, ctx);
  ctx.set_stacks(nullptr);
  inputs.clear();
  std::vector<Tensor>& got = ctx.outputs();
  if (!status.ok()) {
    for (Tensor& t : got) t = Tensor();
    return status;
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    if (got[i].valid()) {
      (*outs)[i].value = std::move(got[i]);
    } else if (it.kind == Kind::kSwitch) {
      (*outs)[i].dead = true;  // the branch not taken
    } else {
      return internal_error(n.op, " '", n.name, "': kernel produced no output ", i);
    }
    got[i] = Tensor();
  }
  return ok_status();
}

void FrameExecutor::Run::finish(const Ready& r, std::vector<Entry>& outs) {
  propagate(r.item, r.instance, r.iter, outs, r.dead);
  count(r.instance, r.iter, -1);
}

Status FrameExecutor::Run::process(Ready& r) {
  std::vector<Entry> outs;
  if (r.dead) {
    outs.assign(fx_.graph_.node(fx_.items_[r.item].node).num_outputs(), Entry{Tensor(), true});
  } else {
    TROUPE_RETURN_IF_ERROR(
        compute(r, *kernels_[r.item].ctx, (*invocations_)[fx_.items_[r.item].node]++, &outs));
  }
  finish(r, outs);
  return ok_status();
}

// Workers take ready nodes earliest iteration first and run their kernels outside the lock,
// each on a context of its own (a node of several iterations at once needs several); the
// bookkeeping is the sequential run's, under the lock. As TF's executor runs inexpensive nodes
// inline, a worker goes on with what its node made ready; another thread is woken (or started,
// up to workers_) only for a node worth one, whose inputs hold some thousands of values.
Status FrameExecutor::Run::run_parallel() {
  std::mutex mu;
  std::condition_variable changed;
  int in_flight = 0, idle = 0;
  bool finished = false;
  Status failed;
  std::vector<char> busy(fx_.items_.size(), 0);  // the plan's own context of each item
  std::vector<std::vector<KernelContext*>> spare(fx_.items_.size());
  std::vector<std::unique_ptr<KernelContext>> extra;
  std::vector<std::thread> helpers;
  auto acquire = [&](int item) -> KernelContext* {
    if (!busy[item]) {
      busy[item] = 1;
      return kernels_[item].ctx;
    }
    if (!spare[item].empty()) {
      KernelContext* c = spare[item].back();
      spare[item].pop_back();
      return c;
    }
    const KernelContext& plan = *kernels_[item].ctx;
    extra.push_back(
        std::make_unique<KernelContext>(plan.node(), plan.allocator(), plan.variables()));
    return extra.back().get();
  };
  std::function<void()> work;
  // Whether one of the next few ready nodes is worth another thread.
  auto worth_waking = [&] {
    int looked = 0;
    for (auto it = ready_.begin(); it != ready_.end() && looked < 8; ++it, ++looked) {
      int64_t values = 0;
      for (const Entry& e : it->second.inputs) values += e.value.num_elements();
      if (values >= 4096) return true;
    }
    return false;
  };
  auto wake = [&] {
    if (!worth_waking()) return;
    if (idle > 0) {
      changed.notify_one();
    } else if (static_cast<int>(helpers.size()) + 1 < fx_.workers_) {
      helpers.emplace_back([&] {
        ScopedFlushDenormal flush;  // as the caller's kernels run
        work();
      });
    }
  };
  work = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!finished) {
      if (!failed.ok() || ready_.empty()) {
        if (in_flight > 0) {
          ++idle;
          changed.wait(lock);
          --idle;
          continue;
        }
        if (failed.ok() && (release_all() || close_a_frame())) continue;
        finished = true;
        changed.notify_all();
        break;
      }
      Ready r = std::move(ready_.begin()->second);
      ready_.erase(ready_.begin());
      std::vector<Entry> outs;
      if (r.dead) {
        outs.assign(fx_.graph_.node(fx_.items_[r.item].node).num_outputs(), Entry{Tensor(), true});
        finish(r, outs);
        continue;
      }
      KernelContext* ctx = acquire(r.item);
      const uint64_t invocation = (*invocations_)[fx_.items_[r.item].node]++;
      ++in_flight;
      wake();
      lock.unlock();
      Status s = compute(r, *ctx, invocation, &outs);
      lock.lock();
      if (ctx == kernels_[r.item].ctx) {
        busy[r.item] = 0;
      } else {
        spare[r.item].push_back(ctx);
      }
      --in_flight;
      if (s.ok()) {
        finish(r, outs);
      } else if (failed.ok()) {
        failed = s;
      }
      if (in_flight == 0 && idle > 0) changed.notify_all();  // they wait for this, or for work
    }
  };
  work();
  // No helper starts once the run has finished (starting takes the lock, finishing holds it).
  for (std::thread& t : helpers) t.join();
  return failed;
}

void FrameExecutor::Run::count(int instance, int64_t iter, int delta) {
  std::vector<int> emptied;
  for (int i = instance; i >= 0;) {
    Instance& in = instances_[i];
    int64_t& n = in.pending[iter];
    n += delta;
    if (n == 0) emptied.push_back(i);
    iter = in.parent_iter;
    i = in.parent;
  }
  for (int i : emptied) settle(i);
}

void FrameExecutor::Run::settle(int instance) {
  Instance& in = instances_[instance];
  while (in.earliest < in.iterations) {
    auto it = in.pending.find(in.earliest);
    if (it != in.pending.end() && it->second > 0) break;
    if (it != in.pending.end()) in.pending.erase(it);
    ++in.earliest;
  }
  release(instance, /*all=*/false);
}

bool FrameExecutor::Run::release(int instance, bool all) {
  std::vector<Deferred> go;
  {
    Instance& in = instances_[instance];
    const int64_t window = fx_.frames_[in.frame].parallel_iterations;
    std::vector<Deferred> keep;
    for (Deferred& d : in.deferred) {
      (all || d.iter + 1 < in.earliest + window ? go : keep).push_back(std::move(d));
    }
    in.deferred = std::move(keep);
  }
  for (Deferred& d : go) {  // sending may add instances: no reference held
    start_iteration(instance, d.iter + 1);
    send(d.item, instance, d.iter + 1, d.outs, false);
  }
  return !go.empty();
}

bool FrameExecutor::Run::release_all() {
  bool any = false;
  for (int i = 0; i < static_cast<int>(instances_.size()); ++i) any |= release(i, /*all=*/true);
  return any;
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
      Instance& in = instances_[instance];
      if (fx_.workers_ > 1 && iter + 1 >= in.earliest + fx_.frames_[in.frame].parallel_iterations) {
        in.deferred.push_back(Deferred{item, iter, outs});  // beyond the window, for now
        return;
      }
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

Result<std::vector<Tensor>> FrameExecutor::Run::go(const std::vector<Tensor>& feeds,
                                                   const std::vector<Output>& fetches) {
  for (size_t f = 0; f < feeds.size(); ++f) {
    for (size_t j = 0; j < fx_.fed_to_[f].size(); ++j) {
      deliver(fx_.fed_to_[f][j], 0, 0, fx_.fed_at_[f][j], Entry{feeds[f], false});
    }
  }
  for (int s : fx_.sources_) {
    count(0, 0, +1);
    make_ready(Ready{s, 0, 0, {}, false});
  }
  if (fx_.workers_ > 1) {
    TROUPE_RETURN_IF_ERROR(run_parallel());
  } else {
    do {
      while (!ready_.empty()) {
        Ready r = std::move(ready_.begin()->second);
        ready_.erase(ready_.begin());
        TROUPE_RETURN_IF_ERROR(process(r));
      }
    } while (close_a_frame());
  }

  std::vector<Tensor> result;
  for (const Output& f : fetches) {
    if (auto fed = std::find(fx_.fed_.begin(), fx_.fed_.end(), f); fed != fx_.fed_.end()) {
      result.push_back(feeds[fed - fx_.fed_.begin()]);
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

Result<std::vector<Tensor>> FrameExecutor::run(const std::vector<Kernel>& kernels,
                                               const std::vector<Tensor>& feeds,
                                               const std::vector<Output>& fetches,
                                               std::vector<uint64_t>* invocations) const {
  Run run(*this, kernels, fetches, invocations);
  return run.go(feeds, fetches);
}

}  // namespace troupe::runtime
