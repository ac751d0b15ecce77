#include "runtime/tensor_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cstring>
#include <functional>

#include "runtime/tensor_wire.h"
#include "schema/tensor.capnp.h"

namespace troupe::runtime {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

}  // namespace

Result<schema::DType> dtype_to_wire(DType t) {
  switch (t) {
    case DType::kFloat32:
      return schema::DType::FLOAT32;
    case DType::kFloat64:
      return schema::DType::FLOAT64;
    case DType::kInt32:
      return schema::DType::INT32;
    case DType::kInt64:
      return schema::DType::INT64;
    case DType::kUInt8:
      return schema::DType::UINT8;
    case DType::kBool:
      return schema::DType::BOOL;
    case DType::kString:
      return schema::DType::STRING;
    case DType::kInvalid:
      break;
  }
  return invalid_argument("cannot encode a tensor of invalid dtype");
}

bool dtype_from_wire(schema::DType t, DType* out) {
  switch (t) {
    case schema::DType::FLOAT32:
      *out = DType::kFloat32;
      return true;
    case schema::DType::FLOAT64:
      *out = DType::kFloat64;
      return true;
    case schema::DType::INT32:
      *out = DType::kInt32;
      return true;
    case schema::DType::INT64:
      *out = DType::kInt64;
      return true;
    case schema::DType::UINT8:
      *out = DType::kUInt8;
      return true;
    case schema::DType::BOOL:
      *out = DType::kBool;
      return true;
    case schema::DType::STRING:
      *out = DType::kString;
      return true;
  }
  return false;
}

namespace {

// Appends what capnp writes to a std::vector<char>, growing it once per segment.
class VectorOutput : public kj::OutputStream {
 public:
  explicit VectorOutput(std::vector<char>* out) : out_(out) {}
  void write(const void* buffer, size_t size) override {
    const char* p = static_cast<const char*>(buffer);
    out_->insert(out_->end(), p, p + size);
  }

 private:
  std::vector<char>* out_;
};

}  // namespace

Result<Tensor> read_tensor(schema::Tensor::Reader msg, std::shared_ptr<const void> keep_alive) {
  DType dtype;
  if (!dtype_from_wire(msg.getDtype(), &dtype)) {
    return invalid_argument("unknown dtype ", int(msg.getDtype()));
  }
  std::vector<int64_t> dims;
  int64_t n = 1;
  for (int64_t d : msg.getShape()) {
    if (d < 0 || (d > 0 && n > kMaxElements / d)) {
      return invalid_argument("bad dimension ", d, " in shape");
    }
    n *= d;
    dims.push_back(d);
  }
  Shape shape(std::move(dims));
  if (dtype == DType::kString) {
    auto strings = msg.getStrings();
    if (int64_t(strings.size()) != n) {
      return invalid_argument("", strings.size(), " strings for shape ", shape);
    }
    Tensor t(DType::kString, shape);
    for (int64_t i = 0; i < n; ++i) {
      auto s = strings[i];
      t.data<std::string>()[i].assign(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return t;
  }
  capnp::Data::Reader data = msg.getData();
  size_t expected = static_cast<size_t>(n) * dtype_size(dtype);
  if (data.size() != expected) {
    return invalid_argument("", data.size(), " data bytes for ", dtype_name(dtype), shape,
                            " (needs ", expected, ")");
  }
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < data.size(); ++i) {
      if (data[i] > 1) return invalid_argument("bool element ", i, " is ", int(data[i]));
    }
  }
  if (keep_alive && reinterpret_cast<uintptr_t>(data.begin()) % 8 == 0) {
    return Tensor::borrowed(dtype, shape, Buffer::borrow(data.begin(), data.size(), keep_alive));
  }
  Tensor t(dtype, shape);
  if (expected > 0) std::memcpy(t.raw_data(), data.begin(), expected);
  return t;
}

Status write_tensor(const Tensor& t, schema::Tensor::Builder msg, capnp::Orphanage orphanage) {
  if (!t.valid()) return invalid_argument("cannot encode a null tensor");
  TROUPE_ASSIGN_OR_RETURN(schema::DType dtype, dtype_to_wire(t.dtype()));
  msg.setDtype(dtype);
  auto shape = msg.initShape(t.rank());
  for (int i = 0; i < t.rank(); ++i) shape.set(i, t.dim(i));
  if (t.dtype() == DType::kString) {
    auto strings = msg.initStrings(static_cast<unsigned>(t.num_elements()));
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const std::string& s = t.data<std::string>()[i];
      strings.set(i, capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size()));
    }
  } else if (t.byte_size() > 0) {
    if (t.byte_size() >= (size_t(1) << 29)) {
      return invalid_argument("tensor of ", t.byte_size(), " bytes exceeds the 512 MiB blob limit");
    }
    // The data stays in the tensor's buffer as its own segment: copied once, when written out.
    msg.adoptData(orphanage.referenceExternalData(
        capnp::Data::Reader(static_cast<const kj::byte*>(t.raw_data()), t.byte_size())));
  }
  return ok_status();
}

Status write_message(capnp::MessageBuilder& builder, std::vector<char>* out) {
  // Sized exactly, so that the bytes are copied once: a reserve of the tensors' bytes plus a
  // margin fell short of a ps reply's header (six tensors: some 400 bytes), and the vector's
  // last growth copied the whole reply again, as much work on the ps as the optimizer's.
  out->clear();
  out->reserve(capnp::computeSerializedSizeInWords(builder) * sizeof(capnp::word));
  VectorOutput stream(out);
  kj::Maybe<kj::Exception> failure =
      kj::runCatchingExceptions([&]() { capnp::writeMessage(stream, builder); });
  KJ_IF_MAYBE (e, failure) {
    return internal_error("writing a Cap'n Proto message: ", e->getDescription().cStr());
  }
  return ok_status();
}

Status read_message(const kj::ArrayPtr<const capnp::word>& words,
                    const std::function<Status(capnp::MessageReader&)>& read) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() + 1024;  // big tensors are legitimate
  Status result;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    capnp::FlatArrayMessageReader reader(words, options);
    result = read(reader);
  });
  KJ_IF_MAYBE (e, failure) {
    return invalid_argument("malformed Cap'n Proto message (", e->getDescription().cStr(), ")");
  }
  return result;
}

Status read_blob(
    std::shared_ptr<const std::vector<char>> bytes,
    const std::function<Status(capnp::MessageReader&, std::shared_ptr<const void>)>& read) {
  if (!bytes) return invalid_argument("null blob");
  const char* data = bytes->data();
  const size_t size = bytes->size();
  return read_blob(Bytes{std::move(bytes), data, size}, read);
}

Status read_blob(
    const Bytes& b,
    const std::function<Status(capnp::MessageReader&, std::shared_ptr<const void>)>& read) {
  if (b.size % sizeof(capnp::word) != 0) {
    return invalid_argument(b.size, " bytes is not a whole number of 8-byte words");
  }
  if (reinterpret_cast<uintptr_t>(b.data) % alignof(capnp::word) == 0) {
    kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(b.data),
                                          b.size / sizeof(capnp::word));
    return read_message(words, [&](capnp::MessageReader& r) { return read(r, b.owner); });
  }
  auto aligned = std::make_shared<std::vector<capnp::word>>(b.size / sizeof(capnp::word));
  if (b.size > 0) std::memcpy(aligned->data(), b.data, b.size);
  kj::ArrayPtr<const capnp::word> words(aligned->data(), aligned->size());
  auto keep = std::static_pointer_cast<const void>(aligned);
  return read_message(words, [&](capnp::MessageReader& r) { return read(r, keep); });
}

Status encode_tensor(const Tensor& t, std::vector<char>* out) {
  capnp::MallocMessageBuilder builder;
  TROUPE_RETURN_IF_ERROR(
      write_tensor(t, builder.initRoot<schema::Tensor>(), builder.getOrphanage()));
  return write_message(builder, out);
}

Result<Tensor> decode_tensor(std::shared_ptr<const std::vector<char>> bytes) {
  Result<Tensor> out = invalid_argument("empty");
  Status s =
      read_blob(std::move(bytes), [&](capnp::MessageReader& r, std::shared_ptr<const void> keep) {
        out = read_tensor(r.getRoot<schema::Tensor>(), keep);
        return out.status();
      });
  if (!s.ok()) return s.with_context("tensor blob");
  return out;
}

Result<Tensor> decode_tensor_copy(const void* data, size_t size) {
  auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(data),
                                                  static_cast<const char*>(data) + size);
  Result<Tensor> t = decode_tensor(copy);
  if (!t.ok() || !t->buffer()->borrowed()) return t;
  return t->clone();  // own the data, not the temporary copy
}

}  // namespace troupe::runtime
