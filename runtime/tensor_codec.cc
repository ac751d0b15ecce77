#include "runtime/tensor_codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cstring>

#include "schema/tensor.capnp.h"

namespace troupe::runtime {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

Result<schema::DType> to_wire(DType t) {
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

bool from_wire(schema::DType t, DType* out) {
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

// Validates a decoded message; `keep_alive` set means the tensor borrows the message's data.
Result<Tensor> read_tensor(const kj::ArrayPtr<const capnp::word>& words,
                           std::shared_ptr<const void> keep_alive) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() + 1024;  // big tensors are legitimate
  Result<Tensor> result = invalid_argument("tensor blob: unreadable");
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    capnp::FlatArrayMessageReader reader(words, options);
    schema::Tensor::Reader msg = reader.getRoot<schema::Tensor>();
    DType dtype;
    if (!from_wire(msg.getDtype(), &dtype)) {
      result = invalid_argument("tensor blob: unknown dtype ", int(msg.getDtype()));
      return;
    }
    std::vector<int64_t> dims;
    int64_t n = 1;
    for (int64_t d : msg.getShape()) {
      if (d < 0 || (d > 0 && n > kMaxElements / d)) {
        result = invalid_argument("tensor blob: bad dimension ", d, " in shape");
        return;
      }
      n *= d;
      dims.push_back(d);
    }
    Shape shape(std::move(dims));
    if (dtype == DType::kString) {
      auto strings = msg.getStrings();
      if (int64_t(strings.size()) != n) {
        result = invalid_argument("tensor blob: ", strings.size(), " strings for shape ", shape);
        return;
      }
      Tensor t(DType::kString, shape);
      for (int64_t i = 0; i < n; ++i) {
        auto s = strings[i];
        t.data<std::string>()[i].assign(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      result = std::move(t);
      return;
    }
    capnp::Data::Reader data = msg.getData();
    size_t expected = static_cast<size_t>(n) * dtype_size(dtype);
    if (data.size() != expected) {
      result = invalid_argument("tensor blob: ", data.size(), " data bytes for ", dtype_name(dtype),
                                shape, " (needs ", expected, ")");
      return;
    }
    if (dtype == DType::kBool) {
      for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] > 1) {
          result = invalid_argument("tensor blob: bool element ", i, " is ", int(data[i]));
          return;
        }
      }
    }
    if (keep_alive) {
      result =
          Tensor::borrowed(dtype, shape, Buffer::borrow(data.begin(), data.size(), keep_alive));
    } else {
      Tensor t(dtype, shape);
      if (expected > 0) std::memcpy(t.raw_data(), data.begin(), expected);
      result = std::move(t);
    }
  });
  KJ_IF_MAYBE (e, failure) {
    return invalid_argument("tensor blob: malformed Cap'n Proto message (",
                            e->getDescription().cStr(), ")");
  }
  return result;
}

}  // namespace

Status encode_tensor(const Tensor& t, std::vector<char>* out) {
  if (!t.valid()) return invalid_argument("cannot encode a null tensor");
  TROUPE_ASSIGN_OR_RETURN(schema::DType dtype, to_wire(t.dtype()));
  capnp::MallocMessageBuilder builder;
  schema::Tensor::Builder msg = builder.initRoot<schema::Tensor>();
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
    // The data stays in the tensor's buffer as its own segment: copied once, into `out`.
    auto orphan = builder.getOrphanage().referenceExternalData(
        capnp::Data::Reader(static_cast<const kj::byte*>(t.raw_data()), t.byte_size()));
    msg.adoptData(kj::mv(orphan));
  }
  out->clear();
  out->reserve(t.byte_size() + 256);
  VectorOutput stream(out);
  capnp::writeMessage(stream, builder);
  return ok_status();
}

Result<Tensor> decode_tensor(std::shared_ptr<const std::vector<char>> bytes) {
  if (!bytes) return invalid_argument("tensor blob: null");
  const std::vector<char>& b = *bytes;
  if (b.size() % sizeof(capnp::word) != 0 ||
      reinterpret_cast<uintptr_t>(b.data()) % alignof(capnp::word) != 0) {
    return decode_tensor_copy(b.data(), b.size());
  }
  kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(b.data()),
                                        b.size() / sizeof(capnp::word));
  return read_tensor(words, std::static_pointer_cast<const void>(bytes));
}

Result<Tensor> decode_tensor_copy(const void* data, size_t size) {
  if (size % sizeof(capnp::word) != 0) {
    return invalid_argument("tensor blob: ", size, " bytes is not a whole number of 8-byte words");
  }
  std::vector<capnp::word> aligned(size / sizeof(capnp::word));
  if (size > 0) std::memcpy(aligned.data(), data, size);
  return read_tensor(kj::ArrayPtr<const capnp::word>(aligned.data(), aligned.size()), nullptr);
}

}  // namespace troupe::runtime
