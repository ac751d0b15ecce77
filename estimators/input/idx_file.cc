#include "estimators/input/idx_file.h"

#include <sys/stat.h>
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

// What zlib says went wrong (a CRC or length mismatch in the gzip trailer, a corrupt deflate
// stream), or "" when the stream only ended.
std::string gz_error(gzFile f) {
  int code = Z_OK;
  const char* text = gzerror(f, &code);
  return code == Z_OK || code == Z_BUF_ERROR ? std::string() : std::string(text);
}

// Deflate cannot shrink data by more than about 1032:1, so a gzip file of s bytes holds at
// most this many.
constexpr int64_t kMaxDeflateRatio = 1032;

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
  // A short read is a truncated file, unless zlib found the data damaged (it may check the
  // whole of a small file, trailer included, at the first read).
  auto short_read = [&](const std::string& what) {
    const std::string why = gz_error(f.get());
    return runtime::data_loss("IDX file '", path,
                              "': ", why.empty() ? what : "corrupt gzip data (" + why + ")");
  };
  unsigned char magic[4];
  if (!read_exact(f.get(), magic, 4)) return short_read("shorter than its 4-byte header");
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
      return short_read("truncated in the header at byte " + std::to_string(4 + 4 * i));
    }
    int64_t d = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | b[3];
    if (d > (int64_t(1) << 31) / std::max<int64_t>(n, 1)) {
      return runtime::invalid_argument("IDX file '", path, "': implausible dimension ", d);
    }
    dims.push_back(d);
    n *= d;
  }
  const int64_t header = 4 + 4 * rank;
  // The header's claim against the file, before allocating what it claims.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return runtime::not_found("IDX file '", path, "' vanished");
  const int64_t file_bytes = st.st_size;
  const bool plain = gzdirect(f.get()) != 0;
  if ((plain && header + n > file_bytes) || (!plain && n / kMaxDeflateRatio > file_bytes)) {
    return runtime::data_loss("IDX file '", path, "': its header claims ", n, " bytes of data but ",
                              plain ? "the file holds " : "a gzip file of ", file_bytes,
                              plain ? " bytes in all" : " bytes cannot hold them");
  }
  TROUPE_ASSIGN_OR_RETURN(
      Tensor t, Tensor::empty(runtime::DType::kUInt8, Shape(dims), runtime::cpu_allocator()));
  if (!read_exact(f.get(), t.raw_data(), static_cast<size_t>(n))) {
    return short_read("body truncated (needs " + std::to_string(n) + " bytes after the " +
                      std::to_string(header) + "-byte header)");
  }
  // Reading on past the body makes zlib check the gzip trailer's CRC and length: a mismatch
  // there is damaged data, not the end of the file.
  unsigned char extra;
  const int more = gzread(f.get(), &extra, 1);
  if (more < 0) {
    return runtime::data_loss("IDX file '", path, "': corrupt gzip data (", gz_error(f.get()), ")");
  }
  if (more > 0) {
    return runtime::invalid_argument("IDX file '", path, "': trailing bytes after ", header + n,
                                     " bytes");
  }
  // zlib reports a stream that ends before its trailer as Z_BUF_ERROR with the data it had:
  // the file was cut short, and the data it holds was never checked against the trailer's CRC.
  int code = Z_OK;
  gzerror(f.get(), &code);
  if (!plain && code == Z_BUF_ERROR) {
    return runtime::data_loss("IDX file '", path,
                              "': the gzip stream ends before its 8-byte trailer (the file is cut "
                              "short; its data cannot be checked)");
  }
  return t;
}

}  // namespace troupe::estimators::input
