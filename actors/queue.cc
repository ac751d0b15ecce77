#include "actors/queue.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <random>

#include "runtime/parallel_section.h"

namespace troupe::actors {

using runtime::DType;
using runtime::Result;
using runtime::Shape;
using runtime::Status;
using runtime::Tensor;

Status check_chunk(const Chunk& chunk) {
  if (chunk.components.empty()) return runtime::invalid_argument("an example needs a component");
  for (size_t c = 0; c < chunk.components.size(); ++c) {
    const Tensor& t = chunk.components[c];
    if (!t.valid() || t.rank() < 1) {
      return runtime::invalid_argument("component ", c, " has no example dimension");
    }
    if (t.dim(0) != chunk.rows()) {
      return runtime::invalid_argument("component ", c, " holds ", t.dim(0),
                                       " examples where component 0 holds ", chunk.rows());
    }
  }
  if (chunk.begin < 0 || chunk.last() > chunk.rows() || chunk.first() > chunk.last()) {
    return runtime::invalid_argument("rows [", chunk.begin, ", ", chunk.end, ") of a chunk of ",
                                     chunk.rows());
  }
  return runtime::ok_status();
}

std::vector<RowRef> rows_of(std::shared_ptr<const Chunk> chunk) {
  std::vector<RowRef> rows;
  rows.reserve(static_cast<size_t>(chunk->last() - chunk->first()));
  for (int64_t r = chunk->first(); r < chunk->last(); ++r) rows.push_back(RowRef{chunk, r});
  return rows;
}

namespace {

Shape example_shape(const Tensor& t) {
  return Shape(std::vector<int64_t>(t.shape().dims().begin() + 1, t.shape().dims().end()));
}

// Copies one example (shape `from`, row-major at `src`) into a zero-filled slot of shape `to`
// (each dimension at least as large) at `dst`, element size `size`.
void copy_padded(const char* src, const Shape& from, char* dst, const Shape& to, size_t size) {
  const int rank = from.rank();
  if (rank == 0) {
    std::memcpy(dst, src, size);
    return;
  }
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(from.num_elements()) * size);
    return;
  }
  // Copy the innermost rows one at a time; the outer index walks `from`'s leading dimensions.
  const int64_t inner = from.dim(rank - 1);
  int64_t outer = 1;
  for (int d = 0; d + 1 < rank; ++d) outer *= from.dim(d);
  std::vector<int64_t> index(static_cast<size_t>(std::max(rank - 1, 0)), 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t dst_offset = 0;
    for (int d = 0; d + 1 < rank; ++d) dst_offset = dst_offset * to.dim(d) + index[d];
    dst_offset *= to.dim(rank - 1);
    std::memcpy(dst + dst_offset * size, src + o * inner * size, static_cast<size_t>(inner) * size);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < from.dim(d)) break;
      index[d] = 0;
    }
  }
}

// Whether the examples of `t` have exactly `shape`; no Shape is built, as this runs for every
// example of every batch.
bool examples_have(const Tensor& t, const Shape& shape) {
  const std::vector<int64_t>& d = t.shape().dims();
  return d.size() == shape.dims().size() + 1 &&
         std::equal(d.begin() + 1, d.end(), shape.dims().begin());
}

// Component c of `rows`, lists of varying length, as a sparse tensor's three parts.
Status stack_sparse(const std::vector<RowRef>& rows, size_t c, std::vector<Tensor>* out) {
  const DType dtype = rows[0].chunk->components[c].dtype();
  int64_t nnz = 0, longest = 0;
  for (const RowRef& r : rows) {
    const Tensor& t = r.chunk->components[c];
    if (t.dtype() != dtype) {
      return runtime::invalid_argument("component ", c, " is ", dtype_name(dtype),
                                       " in one example and ", dtype_name(t.dtype()),
                                       " in another");
    }
    if (t.rank() > 2) {
      return runtime::invalid_argument("component ", c, " is sparse: its examples must be ",
                                       "lists, not of shape ", example_shape(t).to_string());
    }
    const int64_t len = t.rank() == 2 ? t.dim(1) : 1;
    nnz += len;
    longest = std::max(longest, len);
  }
  const auto n = static_cast<int64_t>(rows.size());
  Tensor indices(DType::kInt64, Shape{nnz, 2});
  Tensor values(dtype, Shape{nnz});
  int64_t* at = indices.data<int64_t>();
  const size_t size = dtype_size(dtype);
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& t = rows[static_cast<size_t>(i)].chunk->components[c];
    const int64_t len = t.rank() == 2 ? t.dim(1) : 1;
    const int64_t first = rows[static_cast<size_t>(i)].row * len;
    for (int64_t j = 0; j < len; ++j) {
      at[2 * (k + j)] = i;
      at[2 * (k + j) + 1] = j;
    }
    if (dtype == DType::kString) {
      std::copy_n(t.data<std::string>() + first, len, values.data<std::string>() + k);
    } else {
      std::memcpy(static_cast<char*>(values.raw_data()) + static_cast<size_t>(k) * size,
                  static_cast<const char*>(t.raw_data()) + static_cast<size_t>(first) * size,
                  static_cast<size_t>(len) * size);
    }
    k += len;
  }
  out->push_back(std::move(indices));
  out->push_back(std::move(values));
  out->push_back(Tensor::from_vector<int64_t>(Shape{2}, {n, longest}));
  return runtime::ok_status();
}

}  // namespace

Result<std::vector<Tensor>> stack_rows(const std::vector<RowRef>& rows, bool pad, bool background,
                                       const std::vector<bool>& sparse) {
  if (rows.empty()) return runtime::invalid_argument("no examples to stack");
  const size_t n_components = rows[0].chunk->components.size();
  std::vector<Tensor> out;
  out.reserve(n_components);
  for (size_t c = 0; c < n_components; ++c) {
    if (c < sparse.size() && sparse[c]) {
      for (const RowRef& r : rows) {
        if (r.chunk->components.size() != n_components) {
          return runtime::invalid_argument("examples have ", n_components, " and ",
                                           r.chunk->components.size(), " components");
        }
      }
      TROUPE_RETURN_IF_ERROR(stack_sparse(rows, c, &out));
      continue;
    }
    const Tensor& first = rows[0].chunk->components[c];
    Shape shape = example_shape(first);
    bool varied = false;
    const Chunk* checked = nullptr;  // rows of one chunk share its components' shapes
    for (const RowRef& r : rows) {
      if (r.chunk.get() == checked) continue;
      checked = r.chunk.get();
      if (r.chunk->components.size() != n_components) {
        return runtime::invalid_argument("examples have ", n_components, " and ",
                                         r.chunk->components.size(), " components");
      }
      const Tensor& t = r.chunk->components[c];
      if (t.dtype() != first.dtype()) {
        return runtime::invalid_argument("component ", c, " is ", dtype_name(first.dtype()),
                                         " in one example and ", dtype_name(t.dtype()),
                                         " in another");
      }
      if (examples_have(t, shape)) continue;
      Shape s = example_shape(t);
      if (s.rank() != shape.rank()) {
        return runtime::invalid_argument("component ", c, " has rank ", s.rank(),
                                         " in one example and ", shape.rank(), " in another");
      }
      varied = true;
      if (!pad) {
        return runtime::invalid_argument("component ", c, " has shape ", s.to_string(),
                                         " in one example and ", shape.to_string(),
                                         " in another; a padding queue pads them");
      }
      for (int d = 0; d < s.rank(); ++d) shape.dim(d) = std::max(shape.dim(d), s.dim(d));
    }
    std::vector<int64_t> dims{static_cast<int64_t>(rows.size())};
    dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
    // Zeroed only where padding leaves gaps; otherwise every byte is copied over.
    Tensor batch;
    if (varied || first.dtype() == runtime::DType::kString) {
      batch = Tensor(first.dtype(), Shape(dims));
    } else {
      TROUPE_ASSIGN_OR_RETURN(batch,
                              Tensor::empty(first.dtype(), Shape(dims), runtime::cpu_allocator()));
    }
    const int64_t slot = shape.num_elements();
    if (first.dtype() == runtime::DType::kString) {
      std::string* dst = batch.data<std::string>();
      for (size_t i = 0; i < rows.size(); ++i) {
        const Tensor& t = rows[i].chunk->components[c];
        const Shape from = example_shape(t);
        if (from.rank() > 1 && from != shape) {
          return runtime::unimplemented("component ", c, ": string examples of rank ", from.rank(),
                                        " cannot be padded");
        }
        const int64_t per = from.num_elements();
        const std::string* src = t.data<std::string>() + rows[i].row * per;
        for (int64_t e = 0; e < per; ++e) dst[i * slot + e] = src[e];
      }
    } else if (!varied) {
      // Every example has the batch's shape: one memcpy each and nothing else, since this runs
      // for every example beside training (small examples paid more for Shapes than bytes).
      const size_t bytes = static_cast<size_t>(slot) * dtype_size(first.dtype());
      char* dst = static_cast<char*>(batch.raw_data());
      for (size_t i = 0; i < rows.size();) {
        // Rows in order (a source read without shuffling) go in runs, one memcpy each.
        size_t run = 1;
        while (i + run < rows.size() && rows[i + run].chunk == rows[i].chunk &&
               rows[i + run].row == rows[i].row + static_cast<int64_t>(run)) {
          ++run;
        }
        // Shuffled rows lie anywhere in memory: ask for the start of a later one early.
        if (run == 1 && i + 2 < rows.size()) {
          const char* next = static_cast<const char*>(rows[i + 2].chunk->components[c].raw_data()) +
                             static_cast<size_t>(rows[i + 2].row) * bytes;
          for (size_t k = 0; k < bytes && k < 512; k += 64) __builtin_prefetch(next + k);
        }
        const char* src = static_cast<const char*>(rows[i].chunk->components[c].raw_data());
        std::memcpy(dst + i * bytes, src + static_cast<size_t>(rows[i].row) * bytes, run * bytes);
        if (background && i / 8 != (i + run) / 8) runtime::yield_to_parallel_sections();
        i += run;
      }
    } else {
      const size_t size = dtype_size(first.dtype());
      char* dst = static_cast<char*>(batch.raw_data());
      for (size_t i = 0; i < rows.size(); ++i) {
        const Tensor& t = rows[i].chunk->components[c];
        const Shape from = example_shape(t);
        const int64_t per = from.num_elements();
        const char* src = static_cast<const char*>(t.raw_data()) + rows[i].row * per * size;
        copy_padded(src, from, dst + i * slot * size, shape, size);
        if (background && i % 8 == 7) runtime::yield_to_parallel_sections();
      }
    }
    out.push_back(std::move(batch));
  }
  return out;
}

Result<std::vector<Tensor>> slice_rows(const Chunk& chunk, int64_t first, int64_t n) {
  std::vector<Tensor> out;
  out.reserve(chunk.components.size());
  for (const Tensor& t : chunk.components) {
    std::vector<int64_t> dims = t.shape().dims();
    if (dims.empty() || first < 0 || n < 0 || first + n > dims[0]) {
      return runtime::invalid_argument("rows [", first, ", ", first + n, ") of a component of ",
                                       dims.empty() ? 0 : dims[0], " rows");
    }
    dims[0] = n;
    const int64_t per = t.num_elements() / std::max<int64_t>(1, t.dim(0));
    Tensor batch;
    if (t.dtype() == runtime::DType::kString) {
      batch = Tensor(t.dtype(), Shape(dims));
      std::copy_n(t.data<std::string>() + first * per, n * per, batch.data<std::string>());
    } else {
      TROUPE_ASSIGN_OR_RETURN(batch,
                              Tensor::empty(t.dtype(), Shape(dims), runtime::cpu_allocator()));
      const size_t size = dtype_size(t.dtype());
      std::memcpy(batch.raw_data(),
                  static_cast<const char*>(t.raw_data()) + static_cast<size_t>(first * per) * size,
                  static_cast<size_t>(n * per) * size);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

namespace {

struct PendingEnqueue {
  std::vector<RowRef> rows;
  size_t next = 0;
  caf::typed_response_promise<Status> promise;
};

struct PendingDequeue {
  DequeueRequest request;
  caf::typed_response_promise<Batch> promise;
};

struct QueueState {
  QueueOptions options;
  std::deque<RowRef> rows;
  std::deque<PendingEnqueue> enqueues;
  std::deque<PendingDequeue> dequeues;
  std::mt19937_64 rng;
  bool closed = false;
  Status error;  // a runner failed: every dequeue answers this
  QueueStats stats;
  std::map<caf::actor_addr, std::string> watched;  // producers whose death fails the queue
};

using QueueActor = caf::stateful_actor<QueueState>;

Batch take_rows(QueueState& st, int64_t n, DequeueMode mode) {
  if (mode == DequeueMode::kOne && st.options.kind == QueueKind::kFifo &&
      st.rows.front().chunk->rows() == 1) {
    // An element that is a whole chunk (a batch a runner stacked): hand over its tensors.
    RowRef row = std::move(st.rows.front());
    st.rows.pop_front();
    ++st.stats.dequeued;
    Batch b;
    for (const Tensor& t : row.chunk->components)
      b.components.push_back(t.reshaped(example_shape(t)));
    return b;
  }
  std::vector<RowRef> picked;
  picked.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (st.options.kind == QueueKind::kRandomShuffle) {
      std::uniform_int_distribution<size_t> pick(0, st.rows.size() - 1);
      std::swap(st.rows[pick(st.rng)], st.rows.back());
      picked.push_back(std::move(st.rows.back()));
      st.rows.pop_back();
    } else {
      picked.push_back(std::move(st.rows.front()));
      st.rows.pop_front();
    }
  }
  st.stats.dequeued += n;
  Batch b;
  auto stacked = stack_rows(picked, st.options.kind == QueueKind::kPadding);
  if (!stacked.ok()) {
    b.status = stacked.status().with_context(st.options.name);
    return b;
  }
  b.components = std::move(*stacked);
  if (mode == DequeueMode::kOne) {
    for (Tensor& t : b.components) t = t.reshaped(example_shape(t));
  }
  return b;
}

// kReady: `n` examples, the first as the answer's components and the rest in `more`.
Batch take_ready(QueueState& st, int64_t n) {
  Batch b = take_rows(st, 1, DequeueMode::kOne);
  for (int64_t i = 1; i < n && b.status.ok(); ++i) {
    Batch next = take_rows(st, 1, DequeueMode::kOne);
    if (!next.status.ok()) return next;
    b.more.push_back(std::move(next.components));
  }
  return b;
}

// Moves waiting rows in while there is room and answers waiting dequeues while there are rows,
// until neither can go on.
void pump(QueueState& st) {
  bool progress = true;
  while (progress) {
    progress = false;
    while (!st.enqueues.empty() && static_cast<int64_t>(st.rows.size()) < st.options.capacity) {
      PendingEnqueue& e = st.enqueues.front();
      while (e.next < e.rows.size() && static_cast<int64_t>(st.rows.size()) < st.options.capacity) {
        st.rows.push_back(std::move(e.rows[e.next++]));
        ++st.stats.enqueued;
        progress = true;
      }
      if (e.next < e.rows.size()) break;
      e.promise.deliver(runtime::ok_status());
      st.enqueues.pop_front();
    }
    st.stats.peak_size =
        std::max<int64_t>(st.stats.peak_size, static_cast<int64_t>(st.rows.size()));
    while (!st.dequeues.empty()) {
      PendingDequeue& d = st.dequeues.front();
      if (!st.error.ok()) {
        d.promise.deliver(Batch{st.error, {}});
        st.dequeues.pop_front();
        continue;
      }
      const int64_t size = static_cast<int64_t>(st.rows.size());
      const bool drained_for_good = st.closed && st.enqueues.empty();
      int64_t available = size;
      if (st.options.kind == QueueKind::kRandomShuffle && !drained_for_good) {
        available = size - st.options.min_after_dequeue;
      }
      const DequeueMode mode = d.request.mode;
      const int64_t want =
          mode == DequeueMode::kOne || mode == DequeueMode::kReady ? 1 : d.request.n;
      if (available >= want && mode == DequeueMode::kReady) {
        d.promise.deliver(take_ready(st, std::min(available, d.request.n)));
      } else if (available >= want) {
        d.promise.deliver(take_rows(st, want, d.request.mode));
      } else if (drained_for_good && d.request.mode == DequeueMode::kUpTo && size > 0) {
        d.promise.deliver(take_rows(st, size, d.request.mode));
      } else if (drained_for_good) {
        d.promise.deliver(Batch{runtime::out_of_range(st.options.name, " is closed and has ", size,
                                                      " of the ", want, " examples asked"),
                                {}});
      } else {
        break;
      }
      st.dequeues.pop_front();
      progress = true;
    }
  }
}

caf::behavior queue_actor(QueueActor* self, QueueOptions options) {
  self->state.options = std::move(options);
  self->state.options.capacity = std::max<int64_t>(1, self->state.options.capacity);
  self->state.rng.seed(self->state.options.seed);
  // A stray message (a reply nobody waits for) must not take the queue down with its data.
  self->set_default_handler(caf::print_and_drop);
  self->set_down_handler([self](caf::down_msg& dm) {
    QueueState& st = self->state;
    auto it = st.watched.find(dm.source);
    if (it == st.watched.end()) return;
    const std::string what = it->second;
    st.watched.erase(it);
    if (dm.reason == caf::exit_reason::user_shutdown || dm.reason == caf::exit_reason::normal) {
      return;
    }
    if (st.error.ok()) {
      st.error = runtime::unavailable(what, " stopped: ", self->system().render(dm.reason));
    }
    st.closed = true;
    pump(st);
  });
  // A promise left unanswered when an actor ends is never answered: tell the waiting first.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    QueueState& st = self->state;
    const Status gone = runtime::cancelled(st.options.name, " was stopped");
    for (PendingDequeue& d : st.dequeues) d.promise.deliver(Batch{gone, {}});
    for (PendingEnqueue& e : st.enqueues) e.promise.deliver(gone);
    st.dequeues.clear();
    st.enqueues.clear();
    self->quit(msg.reason);
  });
  return {
      [self](enqueue_atom, EnqueueRequest& req) -> caf::typed_response_promise<Status> {
        QueueState& st = self->state;
        auto promise = self->make_response_promise<Status>();
        if (st.closed) {
          promise.deliver(runtime::cancelled(st.options.name, " is closed"));
          return promise;
        }
        st.enqueues.push_back(PendingEnqueue{std::move(req.rows), 0, promise});
        pump(st);
        return promise;
      },
      [self](dequeue_atom, DequeueRequest& req) -> caf::typed_response_promise<Batch> {
        QueueState& st = self->state;
        auto promise = self->make_response_promise<Batch>();
        if (req.mode != DequeueMode::kOne && req.n < 1) {
          promise.deliver(
              Batch{runtime::invalid_argument(st.options.name, ": cannot dequeue ", req.n), {}});
          return promise;
        }
        st.dequeues.push_back(PendingDequeue{req, promise});
        pump(st);
        // Answered in order: if any dequeue still waits, this one does.
        if (!st.dequeues.empty()) ++st.stats.starved;
        return promise;
      },
      [self](close_atom, bool cancel_pending_enqueues) {
        QueueState& st = self->state;
        st.closed = true;
        if (cancel_pending_enqueues) {
          for (PendingEnqueue& e : st.enqueues) {
            e.promise.deliver(runtime::cancelled(st.options.name, " was closed before ",
                                                 e.rows.size() - e.next, " examples fit"));
          }
          st.enqueues.clear();
        }
        pump(st);
        return runtime::ok_status();
      },
      [self](fail_atom, Status& error) {
        QueueState& st = self->state;
        if (st.error.ok()) st.error = std::move(error);
        st.closed = true;
        for (PendingEnqueue& e : st.enqueues) e.promise.deliver(st.error);
        st.enqueues.clear();
        pump(st);
      },
      [self](watch_atom, caf::actor& producer, std::string& what) {
        self->monitor(producer);
        self->state.watched[producer.address()] = std::move(what);
      },
      [self](size_atom) {
        QueueStats s = self->state.stats;
        s.size = static_cast<int64_t>(self->state.rows.size());
        s.waiting_enqueues = static_cast<int64_t>(self->state.enqueues.size());
        s.waiting_dequeues = static_cast<int64_t>(self->state.dequeues.size());
        s.closed = self->state.closed;
        return s;
      },
  };
}

}  // namespace

caf::actor spawn_queue(caf::actor_system& system, QueueOptions options) {
  return system.spawn(queue_actor, std::move(options));
}

Queue Queue::create(Runtime& runtime, QueueOptions options) {
  return Queue(runtime, spawn_queue(runtime.system(), std::move(options)));
}

Status Queue::send_rows(std::vector<RowRef> rows) {
  caf::scoped_actor self{runtime_->system()};
  Status result = runtime::internal_error("no answer from the queue");
  self->request(actor_, caf::infinite, enqueue_atom::value, EnqueueRequest{std::move(rows)})
      .receive([&](Status& s) { result = std::move(s); },
               [&](caf::error& e) {
                 result = runtime::unavailable("queue: ", runtime_->system().render(e));
               });
  return result;
}

Status Queue::enqueue(std::vector<Tensor> example) {
  auto chunk = std::make_shared<Chunk>();
  for (Tensor& t : example) {
    std::vector<int64_t> dims{1};
    dims.insert(dims.end(), t.shape().dims().begin(), t.shape().dims().end());
    chunk->components.push_back(t.reshaped(Shape(dims)));
  }
  TROUPE_RETURN_IF_ERROR(check_chunk(*chunk));
  return send_rows(rows_of(std::move(chunk)));
}

Status Queue::enqueue_many(std::vector<Tensor> examples) {
  auto chunk = std::make_shared<Chunk>(Chunk{std::move(examples)});
  TROUPE_RETURN_IF_ERROR(check_chunk(*chunk));
  return send_rows(rows_of(std::move(chunk)));
}

Result<std::vector<Tensor>> Queue::take(DequeueRequest request) {
  caf::scoped_actor self{runtime_->system()};
  Batch batch{runtime::internal_error("no answer from the queue"), {}};
  self->request(actor_, caf::infinite, dequeue_atom::value, request)
      .receive([&](Batch& b) { batch = std::move(b); },
               [&](caf::error& e) {
                 batch.status = runtime::unavailable("queue: ", runtime_->system().render(e));
               });
  if (!batch.status.ok()) return batch.status;
  return std::move(batch.components);
}

Result<std::vector<Tensor>> Queue::dequeue() { return take({1, DequeueMode::kOne}); }
Result<std::vector<Tensor>> Queue::dequeue_many(int64_t n) { return take({n, DequeueMode::kMany}); }
Result<std::vector<Tensor>> Queue::dequeue_up_to(int64_t n) {
  return take({n, DequeueMode::kUpTo});
}

Status Queue::close(bool cancel_pending_enqueues) {
  caf::scoped_actor self{runtime_->system()};
  Status result = runtime::internal_error("no answer from the queue");
  self->request(actor_, caf::infinite, close_atom::value, cancel_pending_enqueues)
      .receive([&](Status& s) { result = std::move(s); },
               [&](caf::error& e) {
                 result = runtime::unavailable("queue: ", runtime_->system().render(e));
               });
  return result;
}

QueueStats Queue::stats() {
  caf::scoped_actor self{runtime_->system()};
  QueueStats result;
  self->request(actor_, caf::infinite, size_atom::value)
      .receive([&](QueueStats& s) { result = s; }, [&](caf::error&) {});
  return result;
}

void Queue::watch(const caf::actor& producer, std::string what) {
  caf::anon_send(actor_, watch_atom::value, producer, std::move(what));
}

void Queue::stop() { caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown); }

}  // namespace troupe::actors
