// Image kernels (ops/image_ops.h): each runs its runtime/image.h function on the step's tensors.
#include <string>

#include "kernels/cpu/kernel.h"
#include "runtime/image.h"

namespace troupe::kernels::cpu {

namespace {

namespace image = runtime::image;
using runtime::Result;

enum class Codec { kPng, kJpeg, kAny };

template <Codec kCodec>
struct Decode {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const Tensor& contents = ctx.input(0);
      if (contents.num_elements() != 1) {
        return runtime::invalid_argument(ctx.node().op, " '", ctx.node().name,
                                         "': contents must be one string, got ", contents.shape());
      }
      const std::string& bytes = contents.data<std::string>()[0];
      const int channels = static_cast<int>(ctx.attr<int64_t>("channels"));
      Result<Tensor> pixels = kCodec == Codec::kPng    ? image::decode_png(bytes, channels)
                              : kCodec == Codec::kJpeg ? image::decode_jpeg(bytes, channels)
                                                       : image::decode_image(bytes, channels);
      if (!pixels.ok())
        return pixels.status().with_context(ctx.node().op + " '" + ctx.node().name + "'");
      ctx.set_output(0, *pixels);
      return runtime::ok_status();
    }
  };
};

template <Codec kCodec>
struct Encode {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      Result<std::string> bytes =
          kCodec == Codec::kPng
              ? image::encode_png(ctx.input(0))
              : image::encode_jpeg(ctx.input(0), static_cast<int>(ctx.attr<int64_t>("quality")));
      if (!bytes.ok())
        return bytes.status().with_context(ctx.node().op + " '" + ctx.node().name + "'");
      Tensor* out;
      TROUPE_RETURN_IF_ERROR(ctx.allocate_output(0, Shape{}, &out));
      out->data<std::string>()[0] = std::move(*bytes);
      return runtime::ok_status();
    }
  };
};

template <image::Resize kMethod>
struct Resize {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      const auto& size = ctx.attr<std::vector<int64_t>>("size");
      if (size.size() != 2) return runtime::invalid_argument("size must be [height, width]");
      TROUPE_ASSIGN_OR_RETURN(Tensor y,
                              image::resize(ctx.input(0), size[0], size[1],
                                            {kMethod, ctx.attr<bool>("half_pixel_centers")}));
      ctx.set_output(0, y);
      return runtime::ok_status();
    }
  };
};

template <image::Resize kMethod>
struct ResizeGrad {
  template <class T>
  struct Kernel {
    static Status compute(KernelContext& ctx) {
      TROUPE_ASSIGN_OR_RETURN(Tensor dx,
                              image::resize_grad(ctx.input(0), ctx.input(1).shape(),
                                                 {kMethod, ctx.attr<bool>("half_pixel_centers")}));
      ctx.set_output(0, dx);
      return runtime::ok_status();
    }
  };
};

}  // namespace

TROUPE_REGISTER_KERNELS(image_cpu) {
  constexpr DeviceType kCpu = DeviceType::kCpu;
  registry.add_typed<Decode<Codec::kPng>::Kernel, std::string>("DecodePng", kCpu);
  registry.add_typed<Decode<Codec::kJpeg>::Kernel, std::string>("DecodeJpeg", kCpu);
  registry.add_typed<Decode<Codec::kAny>::Kernel, std::string>("DecodeImage", kCpu);
  registry.add_typed<Encode<Codec::kPng>::Kernel, uint8_t>("EncodePng", kCpu);
  registry.add_typed<Encode<Codec::kJpeg>::Kernel, uint8_t>("EncodeJpeg", kCpu);
  registry.add_typed<Resize<image::Resize::kBilinear>::Kernel, float, double>("ResizeBilinear",
                                                                              kCpu);
  registry.add_typed<ResizeGrad<image::Resize::kBilinear>::Kernel, float, double>(
      "ResizeBilinearGrad", kCpu);
  registry.add_typed<Resize<image::Resize::kNearest>::Kernel, float, double>(
      "ResizeNearestNeighbor", kCpu);
  registry.add_typed<ResizeGrad<image::Resize::kNearest>::Kernel, float, double>(
      "ResizeNearestNeighborGrad", kCpu);
}

}  // namespace troupe::kernels::cpu
