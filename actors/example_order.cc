#include "actors/example_order.h"

#include <algorithm>
#include <numeric>

namespace troupe::actors {

using runtime::Status;

Decoded decode_unit(const Source& source, const std::function<Status(Chunk&)>& map, int64_t seq,
                    int64_t unit) {
  Decoded d;
  d.seq = seq;
  // User code (a source, a map) may throw: that fails the pipeline with what it said, instead
  // of killing the reader.
  try {
    d.status = source.read(unit, &d.chunks, &d.skipped);
    for (Chunk& c : d.chunks) {
      if (!d.status.ok()) break;
      if (map) d.status = map(c).with_context("map");
      if (d.status.ok()) d.status = check_chunk(c);
    }
  } catch (const std::exception& e) {
    d.status = runtime::internal_error("reading unit ", unit, " threw: ", e.what());
  }
  if (!d.status.ok()) d.status = d.status.with_context(source.name());
  return d;
}

ExampleOrder::ExampleOrder(std::shared_ptr<const Source> source, const RunnerOptions& options)
    : source_(std::move(source)), options_(options) {
  units_ = source_->num_units();
  if (units_ == 0) options_.num_epochs = 1;  // nothing to repeat: end at once
  skip_ = std::max<int64_t>(0, options_.skip);
  rng_.seed(options_.seed);
  slices_ = !options_.pad && std::find(options_.sparse.begin(), options_.sparse.end(), true) ==
                                 options_.sparse.end();
}

int64_t ExampleOrder::total_units() const {
  return options_.num_epochs == 0 ? INT64_MAX : units_ * options_.num_epochs;
}

int64_t ExampleOrder::unit_at(int64_t seq) {
  const int64_t epoch = seq / units_;
  auto it = orders_.find(epoch);
  if (it == orders_.end()) {
    std::vector<int64_t> order(static_cast<size_t>(units_));
    std::iota(order.begin(), order.end(), 0);
    if (options_.shuffle) {
      std::mt19937_64 g(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
      std::shuffle(order.begin(), order.end(), g);
    }
    while (!orders_.empty() && orders_.begin()->first < epoch - 1) orders_.erase(orders_.begin());
    it = orders_.emplace(epoch, std::move(order)).first;
  }
  return it->second[static_cast<size_t>(seq % units_)];
}

runtime::Result<std::vector<RowRef>> ExampleOrder::take(Decoded d) {
  ++taken_;
  if (!d.status.ok()) return d.status;
  skipped_ += d.skipped;
  // Examples to stack go straight to those waiting, a chunk as one run, unless the shuffle
  // buffer mixes them.
  const bool batching = options_.batch_size > 0;
  std::vector<RowRef> out;
  for (Chunk& c : d.chunks) {
    auto chunk = std::make_shared<const Chunk>(std::move(c));
    if (batching && !options_.shuffle) {
      waiting_ += chunk->last() - chunk->first();
      pending_.push_back({chunk, chunk->first(), chunk->last()});
      continue;
    }
    for (int64_t r = chunk->first(); r < chunk->last(); ++r) {
      RowRef row{chunk, r};
      if (!options_.shuffle) {
        out.push_back(std::move(row));
      } else if (static_cast<int64_t>(buffer_.size()) <
                 std::max<int64_t>(1, options_.shuffle_buffer)) {
        buffer_.push_back(std::move(row));
      } else {
        std::uniform_int_distribution<size_t> pick(0, buffer_.size() - 1);
        std::swap(buffer_[pick(rng_)], row);
        out.push_back(std::move(row));
      }
    }
  }
  if (taken_ % units_ == 0) {  // an epoch's end
    std::shuffle(buffer_.begin(), buffer_.end(), rng_);
    for (RowRef& r : buffer_) out.push_back(std::move(r));
    buffer_.clear();
    ++epochs_;
  }
  if (batching) {
    for (RowRef& r : out) pending_.push_back({std::move(r.chunk), r.row, r.row + 1});
    waiting_ += static_cast<int64_t>(out.size());
    return std::vector<RowRef>();
  }
  const int64_t dropped = std::min<int64_t>(skip_, static_cast<int64_t>(out.size()));
  out.erase(out.begin(), out.begin() + dropped);
  skip_ -= dropped;
  return out;
}

std::vector<RowRef> ExampleOrder::first_rows(int64_t n) {
  std::vector<RowRef> rows;
  rows.reserve(static_cast<size_t>(n));
  for (auto run = pending_.begin(); static_cast<int64_t>(rows.size()) < n; ++run) {
    for (int64_t r = run->first; r < run->last && static_cast<int64_t>(rows.size()) < n; ++r) {
      // A run's last row takes its reference (the run is dropped next): a shuffled example, a
      // run of one, costs no count up and down.
      rows.push_back({r + 1 == run->last ? std::move(run->chunk) : run->chunk, r});
    }
  }
  return rows;
}

void ExampleOrder::drop_waiting(int64_t n) {
  waiting_ -= n;
  while (n > 0) {
    Run& run = pending_.front();
    const int64_t k = std::min(n, run.last - run.first);
    run.first += k;
    n -= k;
    if (run.first == run.last) pending_.pop_front();
  }
}

runtime::Result<int64_t> ExampleOrder::next_batch(std::vector<runtime::Tensor>* batch,
                                                  bool background) {
  const int64_t size = std::max<int64_t>(1, options_.batch_size);
  for (;;) {
    const int64_t take = std::min(waiting_, size);
    if (take == 0 || (take < size && !units_done())) return 0;
    if (take < size && options_.drop_remainder) {
      drop_waiting(take);
      return 0;
    }
    if (skip_ > 0) {
      --skip_;
      drop_waiting(take);
      continue;
    }
    const Run& front = pending_.front();
    auto stacked = slices_ && front.last - front.first >= take
                       ? slice_rows(*front.chunk, front.first, take)
                       : stack_rows(first_rows(take), options_.pad, background, options_.sparse);
    drop_waiting(take);
    if (!stacked.ok()) return stacked.status().with_context(source_->name());
    *batch = std::move(*stacked);
    return take;
  }
}

int64_t ExampleOrder::example_bytes() const {
  if (pending_.empty()) return 0;
  int64_t bytes = 0;
  for (const runtime::Tensor& t : pending_.front().chunk->components) {
    bytes += t.num_elements() / std::max<int64_t>(1, t.dim(0)) *
             static_cast<int64_t>(runtime::dtype_size(t.dtype()));
  }
  return bytes;
}

}  // namespace troupe::actors
