// IDX files (MNIST, Fashion-MNIST), plain or gzipped, read into a uint8 tensor.
//
//   Result<Tensor> images =
//   read_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); images->shape(); //
//   [60000,28,28]
//
// Errors name the file and what is wrong with it (a bad magic number, a truncated body at byte
// N). Thread-safe: no shared state.
#pragma once

#include <string>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::estimators::input {

// Only the unsigned-byte element type (0x08) is supported, which is what the datasets use.
runtime::Result<runtime::Tensor> read_idx(const std::string& path);

}  // namespace troupe::estimators::input
