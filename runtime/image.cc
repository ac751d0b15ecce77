#include "runtime/image.h"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

namespace troupe::runtime::image {

namespace {

// [.., h, w, c]: the dimensions an image function works on, and how many images.
struct Layout {
  int64_t images = 1, height = 0, width = 0, channels = 0;
};
Result<Layout> layout_of(const Tensor& t, const char* what) {
  if (t.rank() != 3 && t.rank() != 4) {
    return invalid_argument(what,
                            ": images are [height, width, channels] or [batch, height, "
                            "width, channels], not ",
                            t.shape());
  }
  const int r = t.rank();
  return Layout{r == 4 ? t.dim(0) : 1, t.dim(r - 3), t.dim(r - 2), t.dim(r - 1)};
}
Shape with_hw(const Tensor& t, int64_t height, int64_t width) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[dims.size() - 3] = height;
  dims[dims.size() - 2] = width;
  return Shape(dims);
}

Status expect_uint8_image(const Tensor& image, const char* what) {
  if (image.dtype() != DType::kUInt8 || image.rank() != 3) {
    return invalid_argument(what, ": needs a uint8 [height, width, channels] image, not ",
                            dtype_name(image.dtype()), " ", image.shape());
  }
  return ok_status();
}

// ---- JPEG: libjpeg reports errors by calling error_exit, which must not return; it jumps back
// to the setjmp of the phase that called into the library. Each phase keeps only plain values
// on its frame, so that the jump skips no destructor.

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_error_exit(j_common_ptr info) {
  auto* e = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->jump, 1);
}
void jpeg_quiet(j_common_ptr, int) {}  // warnings (a truncated file, extra bytes) are not errors

// libjpeg's error manager reporting into `e`: an error jumps to e->jump, a warning is dropped.
jpeg_error_mgr* reporting_to(JpegError* e) {
  jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_error_exit;
  e->mgr.emit_message = jpeg_quiet;
  return &e->mgr;
}

struct JpegHeader {
  int64_t height = 0, width = 0, channels = 0;
};

// Reads the header of `bytes` and decodes into `out` (sized by the caller from the header,
// when `out` is not null); the library's message on failure, "" on success.
bool jpeg_decode(const unsigned char* bytes, size_t size, int want, JpegHeader* header,
                 unsigned char* out, char* message) {
  jpeg_decompress_struct info;
  JpegError error;
  info.err = reporting_to(&error);
  if (setjmp(error.jump)) {
    std::memcpy(message, error.message, JMSG_LENGTH_MAX);
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (want == 1) info.out_color_space = JCS_GRAYSCALE;
  if (want == 3) info.out_color_space = JCS_RGB;
  jpeg_calc_output_dimensions(&info);
  header->height = info.output_height;
  header->width = info.output_width;
  header->channels = info.output_components;
  if (out != nullptr) {
    jpeg_start_decompress(&info);
    const size_t row = static_cast<size_t>(info.output_width) * info.output_components;
    while (info.output_scanline < info.output_height) {
      JSAMPROW line = out + row * info.output_scanline;
      jpeg_read_scanlines(&info, &line, 1);
    }
    jpeg_finish_decompress(&info);
  }
  jpeg_destroy_decompress(&info);
  return true;
}

bool jpeg_encode(const unsigned char* pixels, int64_t height, int64_t width, int channels,
                 int quality, unsigned char** out, unsigned long* out_size, char* message) {
  jpeg_compress_struct info;
  JpegError error;
  info.err = reporting_to(&error);
  if (setjmp(error.jump)) {
    std::memcpy(message, error.message, JMSG_LENGTH_MAX);
    jpeg_destroy_compress(&info);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, out, out_size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = channels;
  info.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const size_t row = static_cast<size_t>(width) * channels;
  while (info.next_scanline < info.image_height) {
    JSAMPROW line = const_cast<unsigned char*>(pixels) + row * info.next_scanline;
    jpeg_write_scanlines(&info, &line, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

constexpr int64_t kMostPixels = int64_t{1} << 28;  // a header claiming more is refused

// The source pixel rows (or columns) and weights of each output one, as TF computes them.
struct Sample {
  int64_t lower = 0, upper = 0;
  double lerp = 0;
};
std::vector<Sample> samples(int64_t out, int64_t in, const ResizeOptions& o) {
  std::vector<Sample> s(static_cast<size_t>(out));
  const double scale = out > 0 ? static_cast<double>(in) / static_cast<double>(out) : 0;
  for (int64_t i = 0; i < out; ++i) {
    Sample& x = s[static_cast<size_t>(i)];
    if (o.method == Resize::kNearest) {
      const double at = o.half_pixel_centers ? (static_cast<double>(i) + 0.5) * scale
                                             : static_cast<double>(i) * scale;
      x.lower = x.upper = std::min(static_cast<int64_t>(std::floor(at)), in - 1);
      continue;
    }
    const double at = o.half_pixel_centers ? (static_cast<double>(i) + 0.5) * scale - 0.5
                                           : static_cast<double>(i) * scale;
    const double floor = std::floor(at);
    x.lower = std::max<int64_t>(static_cast<int64_t>(floor), 0);
    x.upper = std::min<int64_t>(static_cast<int64_t>(std::ceil(at)), in - 1);
    x.lower = std::min(x.lower, in - 1);
    x.lerp = at - floor;
  }
  return s;
}

template <class T, bool kGrad>
void resample(const T* in, T* out, const Layout& small, const Layout& big,
              const std::vector<Sample>& ys, const std::vector<Sample>& xs) {
  // Forward: `in` is the source (big), `out` the result (small: the output's dims). Gradient:
  // `in` is dy (small), `out` the source's gradient (big), added into.
  const int64_t c = big.channels;
  for (int64_t b = 0; b < big.images; ++b) {
    for (int64_t y = 0; y < small.height; ++y) {
      const Sample& sy = ys[static_cast<size_t>(y)];
      for (int64_t x = 0; x < small.width; ++x) {
        const Sample& sx = xs[static_cast<size_t>(x)];
        const T wy = static_cast<T>(sy.lerp), wx = static_cast<T>(sx.lerp);
        const int64_t corner[4] = {
            (sy.lower * big.width + sx.lower) * c, (sy.lower * big.width + sx.upper) * c,
            (sy.upper * big.width + sx.lower) * c, (sy.upper * big.width + sx.upper) * c};
        const T weight[4] = {(1 - wy) * (1 - wx), (1 - wy) * wx, wy * (1 - wx), wy * wx};
        const int64_t here = ((b * small.height + y) * small.width + x) * c;
        const int64_t base = b * big.height * big.width * c;
        for (int64_t k = 0; k < c; ++k) {
          if constexpr (kGrad) {
            for (int i = 0; i < 4; ++i) out[base + corner[i] + k] += weight[i] * in[here + k];
          } else {
            T v = 0;
            for (int i = 0; i < 4; ++i) v += weight[i] * in[base + corner[i] + k];
            out[here + k] = v;
          }
        }
      }
    }
  }
}

// Copies the window of each image of `images` ([.., h, w, c], any dtype) into `out`, reading
// row y, column x of the source at (top + y, left + x) or, flipped, from the other end.
Result<Tensor> window(const Tensor& images, int64_t top, int64_t left, int64_t height,
                      int64_t width, bool flip_rows, bool flip_columns, const char* what) {
  TROUPE_ASSIGN_OR_RETURN(Layout l, layout_of(images, what));
  if (images.dtype() == DType::kString) return invalid_argument(what, ": not of strings");
  if (top < 0 || left < 0 || height < 0 || width < 0 || top + height > l.height ||
      left + width > l.width) {
    return invalid_argument(what, ": the window of ", height, "x", width, " at (", top, ", ", left,
                            ") leaves the ", l.height, "x", l.width, " image");
  }
  Tensor out(images.dtype(), with_hw(images, height, width));
  const size_t pixel = dtype_size(images.dtype()) * static_cast<size_t>(l.channels);
  const char* in = static_cast<const char*>(images.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (int64_t b = 0; b < l.images; ++b) {
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = top + (flip_rows ? height - 1 - y : y);
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = left + (flip_columns ? width - 1 - x : x);
        std::memcpy(to + static_cast<size_t>((b * height + y) * width + x) * pixel,
                    in + static_cast<size_t>((b * l.height + sy) * l.width + sx) * pixel, pixel);
      }
    }
  }
  return out;
}

}  // namespace

Result<Tensor> decode_png(std::string_view bytes, int channels) {
  if (channels != 0 && channels != 1 && channels != 3 && channels != 4) {
    return invalid_argument("decode_png: channels ", channels, " is not 0, 1, 3 or 4");
  }
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return invalid_argument("decode_png: not a PNG image (", image.message, ")");
  }
  const png_uint_32 as_stored = PNG_IMAGE_SAMPLE_CHANNELS(image.format);
  const int keep = channels == 0 ? static_cast<int>(as_stored) : channels;
  // 16-bit samples are read as they are stored (libpng's 8-bit formats would gamma-encode
  // them) and scaled to 8 bits by their high byte, as TF's decode_png.
  const bool wide = (image.format & PNG_FORMAT_FLAG_LINEAR) != 0;
  image.format = (keep == 1   ? PNG_FORMAT_GRAY
                  : keep == 2 ? PNG_FORMAT_GA
                  : keep == 3 ? PNG_FORMAT_RGB
                              : PNG_FORMAT_RGBA) |
                 (wide ? PNG_FORMAT_FLAG_LINEAR : 0);
  if (static_cast<int64_t>(image.width) * image.height > kMostPixels) {
    png_image_free(&image);
    return invalid_argument("decode_png: ", image.width, "x", image.height,
                            " pixels is more than troupe decodes");
  }
  Tensor out(DType::kUInt8, Shape{image.height, image.width, keep});
  std::vector<uint16_t> samples(wide ? static_cast<size_t>(out.num_elements()) : 0);
  if (!png_image_finish_read(&image, nullptr, wide ? samples.data() : out.raw_data(), 0, nullptr)) {
    return invalid_argument("decode_png: a damaged PNG image (", image.message, ")");
  }
  if (wide) {
    // libpng hands linear samples with alpha premultiplied: undone before the scaling.
    const bool alpha = keep == 2 || keep == 4;
    for (int64_t p = 0; p < out.num_elements() / keep; ++p) {
      const uint16_t* in = samples.data() + p * keep;
      uint8_t* to = out.data<uint8_t>() + p * keep;
      const uint32_t a = alpha ? in[keep - 1] : 65535;
      for (int k = 0; k < keep; ++k) {
        uint32_t v = in[k];
        if (alpha && k < keep - 1) v = a == 0 ? 0 : std::min<uint32_t>(65535, v * 65535u / a);
        to[k] = static_cast<uint8_t>(v >> 8);
      }
    }
  }
  return out;
}

Result<Tensor> decode_jpeg(std::string_view bytes, int channels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return invalid_argument("decode_jpeg: channels ", channels, " is not 0, 1 or 3");
  }
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  JpegHeader header;
  char message[JMSG_LENGTH_MAX] = "";
  if (bytes.size() < 3 || !jpeg_decode(data, bytes.size(), channels, &header, nullptr, message)) {
    return invalid_argument("decode_jpeg: not a JPEG image",
                            message[0] ? std::string(" (") + message + ")" : std::string());
  }
  if (header.height * header.width > kMostPixels || header.channels < 1) {
    return invalid_argument("decode_jpeg: ", header.width, "x", header.height, "x", header.channels,
                            " is not an image troupe decodes");
  }
  Tensor out(DType::kUInt8, Shape{header.height, header.width, header.channels});
  if (!jpeg_decode(data, bytes.size(), channels, &header, out.data<uint8_t>(), message)) {
    return invalid_argument("decode_jpeg: a damaged JPEG image (", message, ")");
  }
  return out;
}

Result<Tensor> decode_image(std::string_view bytes, int channels) {
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0) {
    return decode_png(bytes, channels);
  }
  if (bytes.size() >= 3 && std::memcmp(bytes.data(), "\xff\xd8\xff", 3) == 0) {
    return decode_jpeg(bytes, channels);
  }
  return invalid_argument("decode_image: neither a PNG nor a JPEG image");
}

Result<std::string> encode_png(const Tensor& image) {
  TROUPE_RETURN_IF_ERROR(expect_uint8_image(image, "encode_png"));
  const int64_t c = image.dim(2);
  if (c < 1 || c > 4) return invalid_argument("encode_png: ", c, " channels is not 1 to 4");
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.dim(1));
  png.height = static_cast<png_uint_32>(image.dim(0));
  png.format = c == 1   ? PNG_FORMAT_GRAY
               : c == 2 ? PNG_FORMAT_GA
               : c == 3 ? PNG_FORMAT_RGB
                        : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.raw_data(), 0, nullptr)) {
    return invalid_argument("encode_png: ", png.message);
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, image.raw_data(), 0, nullptr)) {
    return invalid_argument("encode_png: ", png.message);
  }
  out.resize(size);
  return out;
}

Result<std::string> encode_jpeg(const Tensor& image, int quality) {
  TROUPE_RETURN_IF_ERROR(expect_uint8_image(image, "encode_jpeg"));
  const int64_t c = image.dim(2);
  if (c != 1 && c != 3) return invalid_argument("encode_jpeg: ", c, " channels is not 1 or 3");
  if (quality < 1 || quality > 100) {
    return invalid_argument("encode_jpeg: quality ", quality, " is not 1 to 100");
  }
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  char message[JMSG_LENGTH_MAX] = "";
  const bool ok = jpeg_encode(image.data<uint8_t>(), image.dim(0), image.dim(1),
                              static_cast<int>(c), quality, &buffer, &size, message);
  std::string out = ok ? std::string(reinterpret_cast<char*>(buffer), size) : std::string();
  std::free(buffer);
  if (!ok) return invalid_argument("encode_jpeg: ", message);
  return out;
}

Tensor to_float(const Tensor& image) {
  Tensor out(DType::kFloat32, image.shape());
  float* to = out.data<float>();
  const int64_t n = image.num_elements();
  switch (image.dtype()) {
    case DType::kUInt8:
      for (int64_t i = 0; i < n; ++i) to[i] = image.data<uint8_t>()[i] / 255.f;
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) to[i] = static_cast<float>(image.data<double>()[i]);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) to[i] = static_cast<float>(image.data<int32_t>()[i]);
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) to[i] = static_cast<float>(image.data<int64_t>()[i]);
      break;
    default:
      return image;
  }
  return out;
}

Result<Tensor> resize(const Tensor& images, int64_t height, int64_t width, ResizeOptions o) {
  TROUPE_ASSIGN_OR_RETURN(Layout big, layout_of(images, "resize"));
  if (height < 1 || width < 1 || height * width > kMostPixels) {
    return invalid_argument("resize: ", height, "x", width, " is not a size to resize to");
  }
  if (big.height < 1 || big.width < 1) return invalid_argument("resize: an empty image");
  Layout small{big.images, height, width, big.channels};
  Tensor out(images.dtype(), with_hw(images, height, width));
  const auto ys = samples(height, big.height, o), xs = samples(width, big.width, o);
  if (images.dtype() == DType::kFloat32) {
    resample<float, false>(images.data<float>(), out.data<float>(), small, big, ys, xs);
  } else if (images.dtype() == DType::kFloat64) {
    resample<double, false>(images.data<double>(), out.data<double>(), small, big, ys, xs);
  } else {
    return invalid_argument("resize: needs float32 or float64 images, not ",
                            dtype_name(images.dtype()), " (image::to_float converts)");
  }
  return out;
}

Result<Tensor> resize_grad(const Tensor& dy, const Shape& input_shape, ResizeOptions o) {
  TROUPE_ASSIGN_OR_RETURN(Layout small, layout_of(dy, "resize_grad"));
  Tensor out(dy.dtype(), input_shape);
  TROUPE_ASSIGN_OR_RETURN(Layout big, layout_of(out, "resize_grad"));
  if (big.images != small.images || big.channels != small.channels) {
    return invalid_argument("resize_grad: dy ", dy.shape(), " is not resized from ", input_shape);
  }
  const auto ys = samples(small.height, big.height, o), xs = samples(small.width, big.width, o);
  if (dy.dtype() == DType::kFloat32) {
    std::fill_n(out.data<float>(), out.num_elements(), 0.f);
    resample<float, true>(dy.data<float>(), out.data<float>(), small, big, ys, xs);
  } else if (dy.dtype() == DType::kFloat64) {
    std::fill_n(out.data<double>(), out.num_elements(), 0.0);
    resample<double, true>(dy.data<double>(), out.data<double>(), small, big, ys, xs);
  } else {
    return invalid_argument("resize_grad: needs float32 or float64, not ", dtype_name(dy.dtype()));
  }
  return out;
}

Result<Tensor> flip_left_right(const Tensor& images) {
  TROUPE_ASSIGN_OR_RETURN(Layout l, layout_of(images, "flip_left_right"));
  return window(images, 0, 0, l.height, l.width, false, true, "flip_left_right");
}

Result<Tensor> flip_up_down(const Tensor& images) {
  TROUPE_ASSIGN_OR_RETURN(Layout l, layout_of(images, "flip_up_down"));
  return window(images, 0, 0, l.height, l.width, true, false, "flip_up_down");
}

Result<Tensor> crop_to_bounding_box(const Tensor& images, int64_t top, int64_t left, int64_t height,
                                    int64_t width) {
  return window(images, top, left, height, width, false, false, "crop_to_bounding_box");
}

Result<Tensor> central_crop(const Tensor& images, double fraction) {
  TROUPE_ASSIGN_OR_RETURN(Layout l, layout_of(images, "central_crop"));
  if (!(fraction > 0 && fraction <= 1)) {
    return invalid_argument("central_crop: fraction ", fraction, " is not in (0, 1]");
  }
  // As TF: the margin is what the fraction leaves, split evenly (rounded down).
  const int64_t top = static_cast<int64_t>((l.height - l.height * fraction) / 2);
  const int64_t left = static_cast<int64_t>((l.width - l.width * fraction) / 2);
  return window(images, top, left, l.height - 2 * top, l.width - 2 * left, false, false,
                "central_crop");
}

Result<Tensor> per_image_standardization(const Tensor& images) {
  TROUPE_ASSIGN_OR_RETURN(Layout l, layout_of(images, "per_image_standardization"));
  if (images.dtype() != DType::kFloat32 && images.dtype() != DType::kFloat64) {
    return invalid_argument("per_image_standardization: needs float32 or float64 images, not ",
                            dtype_name(images.dtype()));
  }
  Tensor out(images.dtype(), images.shape());
  const int64_t n = l.height * l.width * l.channels;
  for (int64_t b = 0; b < l.images; ++b) {
    auto one = [&](auto* in, auto* to) {
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < n; ++i) sum += in[i];
      const double mean = n > 0 ? sum / static_cast<double>(n) : 0;
      for (int64_t i = 0; i < n; ++i) squares += (in[i] - mean) * (in[i] - mean);
      const double stddev = n > 0 ? std::sqrt(squares / static_cast<double>(n)) : 0;
      const double scale = std::max(stddev, n > 0 ? 1 / std::sqrt(static_cast<double>(n)) : 1.0);
      for (int64_t i = 0; i < n; ++i) {
        to[i] = static_cast<std::remove_reference_t<decltype(*to)>>((in[i] - mean) / scale);
      }
    };
    if (images.dtype() == DType::kFloat32) {
      one(images.data<float>() + b * n, out.data<float>() + b * n);
    } else {
      one(images.data<double>() + b * n, out.data<double>() + b * n);
    }
  }
  return out;
}

}  // namespace troupe::runtime::image
