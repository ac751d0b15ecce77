#include "estimators/input/idx_file.h"

#include <zlib.h>

#include <memory>
#include <vector>

namespace troupe::estimators::input {

using runtime::Result;
using runtime::Shape;
using runtime::Tensor;

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// Reads exactly n bytes; false at end of file or on a read error.
bool read_exact(gzFile f, void* out, size_t n) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    int got = gzread(f, p, chunk);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

Result<Tensor> read_idx(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) return runtime::not_found("IDX file '", path, "' cannot be opened");
  unsigned char magic[4];
  if (!read_exact(f.get(), magic, 4)) {
    return runtime::data_loss("IDX file '", path, "': shorter than its 4-byte header");
  }
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4) {
    return runtime::invalid_argument("IDX file '", path,
                                     "': bad magic number (expected 00 00 08 "
                                     "0N for unsigned bytes of rank N <= 4)");
  }
  const int rank = magic[3];
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    if (!read_exact(f.get(), b, 4)) {
      return runtime::data_loss("IDX file '", path, "': truncated in the header at byte ",
                                4 + 4 * i);
    }
    int64_t d = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | b[3];
    if (d > (int64_t(1) << 31) / std::max<int64_t>(n, 1)) {
      return runtime::invalid_argument("IDX file '", path, "': implausible dimension ", d);
    }
    dims.push_back(d);
    n *= d;
  }
  Tensor t(runtime::DType::kUInt8, Shape(dims));
  const int64_t header = 4 + 4 * rank;
  if (!read_exact(f.get(), t.raw_data(), static_cast<size_t>(n))) {
    return runtime::data_loss("IDX file '", path, "': body truncated (needs ", n,
                              " bytes after the ", header, "-byte header)");
  }
  unsigned char extra;
  if (gzread(f.get(), &extra, 1) > 0) {
    return runtime::invalid_argument("IDX file '", path, "': trailing bytes after ", header + n,
                                     " bytes");
  }
  return t;
}

}  // namespace troupe::estimators::input
