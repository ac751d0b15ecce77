#include "runtime/record_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/crc32c.h"
#include "runtime/log.h"

namespace troupe::runtime {

namespace {

constexpr size_t kHeader = 12;  // length + its CRC
constexpr size_t kFooter = 4;
constexpr size_t kFlushAt = 1 << 20;

void put_u32(uint32_t v, char* p) { std::memcpy(p, &v, 4); }
void put_u64(uint64_t v, char* p) { std::memcpy(p, &v, 8); }

Status write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return internal_error("cannot write ", path, ": ", std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ok_status();
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void append_record_frame(const void* data, size_t size, std::string* out) {
  char header[kHeader];
  put_u64(size, header);
  put_u32(mask_crc32c(crc32c(header, 8)), header + 8);
  out->append(header, kHeader);
  out->append(static_cast<const char*>(data), size);
  char footer[kFooter];
  put_u32(mask_crc32c(crc32c(data, size)), footer);
  out->append(footer, kFooter);
}

Result<RecordWriter> RecordWriter::open(const std::string& path, bool append) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return not_found("cannot open ", path, " for writing: ", std::strerror(errno));
  return RecordWriter(fd, path);
}

RecordWriter::RecordWriter(RecordWriter&& o) noexcept
    : fd_(o.fd_), path_(std::move(o.path_)), buffer_(std::move(o.buffer_)) {
  o.fd_ = -1;
}

RecordWriter& RecordWriter::operator=(RecordWriter&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    buffer_ = std::move(o.buffer_);
    o.fd_ = -1;
  }
  return *this;
}

RecordWriter::~RecordWriter() { close(); }

Status RecordWriter::write(const void* data, size_t size) {
  if (fd_ < 0) return failed_precondition(path_, " is closed");
  append_record_frame(data, size, &buffer_);
  if (buffer_.size() >= kFlushAt) return flush();
  return ok_status();
}

Status RecordWriter::flush() {
  if (fd_ < 0) return failed_precondition(path_, " is closed");
  Status s = write_all(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
  return s;
}

Status RecordWriter::sync() {
  TROUPE_RETURN_IF_ERROR(flush());
  if (::fsync(fd_) != 0) return internal_error("cannot fsync ", path_, ": ", std::strerror(errno));
  return ok_status();
}

Status RecordWriter::close() {
  if (fd_ < 0) return ok_status();
  Status s = flush();
  if (::close(fd_) != 0 && s.ok()) s = internal_error("cannot close ", path_);
  fd_ = -1;
  return s;
}

Result<bool> RecordReader::next(std::string_view* record) {
  if (offset_ == size_) return false;
  const uint64_t at = offset_;
  if (size_ - offset_ < kHeader) {
    return data_loss(name_, ": truncated record header at byte ", at);
  }
  uint64_t length;
  uint32_t length_crc;
  std::memcpy(&length, data_ + offset_, 8);
  std::memcpy(&length_crc, data_ + offset_ + 8, 4);
  if (unmask_crc32c(length_crc) != crc32c(data_ + offset_, 8)) {
    return data_loss(name_, ": corrupt record length at byte ", at, " (checksum mismatch)");
  }
  if (length > size_ - offset_ - kHeader || size_ - offset_ - kHeader - length < kFooter) {
    return data_loss(name_, ": truncated record at byte ", at, " (", length,
                     " bytes announced, file ends first)");
  }
  const char* body = data_ + offset_ + kHeader;
  uint32_t body_crc;
  std::memcpy(&body_crc, body + length, 4);
  // Step over the frame first: a bad body still has a good length, so a reader that skips bad
  // records can go on with the next one.
  offset_ += kHeader + length + kFooter;
  if (unmask_crc32c(body_crc) != crc32c(body, length)) {
    return data_loss(name_, ": corrupt record at byte ", at, " (checksum mismatch)");
  }
  *record = std::string_view(body, length);
  return true;
}

uint64_t RecordReader::resync() {
  for (uint64_t p = offset_ + 1; p < size_ && size_ - p >= kHeader + kFooter; ++p) {
    uint64_t length;
    uint32_t length_crc;
    std::memcpy(&length, data_ + p, 8);
    std::memcpy(&length_crc, data_ + p + 8, 4);
    if (unmask_crc32c(length_crc) == crc32c(data_ + p, 8) &&
        length <= size_ - p - kHeader - kFooter) {
      return offset_ = p;
    }
  }
  return offset_ = size_;
}

Result<std::vector<FrameSpan>> index_frames(std::string_view data, const std::string& name,
                                            bool skip_damaged) {
  RecordReader reader(data.data(), data.size(), name);
  std::vector<FrameSpan> spans;
  std::string_view body;
  while (true) {
    const uint64_t at = reader.offset();
    Result<bool> more = reader.next(&body);
    if (!more.ok() && reader.offset() == at) {
      if (!skip_damaged) return more.status();
      const uint64_t resume = reader.resync();
      spans.push_back({at, resume - at, true});
      log_warning(name, ": skipping bytes ", at, " to ", resume, " (", more.status().message(), ")",
                  resume < data.size() ? "; reading on from there" : "");
      continue;
    }
    if (more.ok() && !*more) return spans;
    spans.push_back({at, reader.offset() - at, false});
  }
}

Status read_file(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open ", path, ": ", std::strerror(errno));
  out->clear();
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return internal_error("cannot read ", path, ": ", std::strerror(errno));
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return ok_status();
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return not_found("cannot create ", tmp, ": ", std::strerror(errno));
  Status s = write_all(fd, data.data(), data.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0)
    s = internal_error("cannot fsync ", tmp, ": ", std::strerror(errno));
  ::close(fd);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = internal_error("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable only once the directory entry is.
  const int dir = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return ok_status();
}

}  // namespace troupe::runtime
