# Finds the Debian packages troupe builds on (DESIGN.md §1). tools/dev installs them.
find_package(Threads REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(CapnProto REQUIRED)
find_package(ZLIB REQUIRED)
# Protocol Buffers: tf.Example, the records of TensorFlow's TFRecord files (schema/example.proto).
find_package(Protobuf REQUIRED)
# gRPC: troupe serve's TF Serving services (schema/serving_service.proto); the command only,
# libtroupe does not link it.
find_package(gRPC REQUIRED)
# Images (runtime/image.h): libpng and libjpeg-turbo, for tf.image's codecs and TensorBoard's.
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
find_package(doctest QUIET)
# JSON: nlohmann's for export metadata and the REST API's answers, simdjson to parse requests
# (tools/serve/json_tensors.h says why two).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(simdjson 3 REQUIRED)
# Boost: program_options for the troupe command; Asio (header-only) runs the data channel's and
# the REST server's sockets.
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)
# OpenSSL's libcrypto: the job secret's HMAC-SHA256 challenge-response and its random bytes.
find_package(OpenSSL REQUIRED)

# OpenBLAS (pthread build) is the GEMM: measured fastest, and as fast inside actors as in a loop.
find_library(TROUPE_OPENBLAS_LIB NAMES openblas
             PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/aarch64-linux-gnu/openblas-pthread)
find_path(TROUPE_CBLAS_INCLUDE NAMES cblas.h
          PATH_SUFFIXES openblas-pthread x86_64-linux-gnu/openblas-pthread openblas)
if(NOT TROUPE_OPENBLAS_LIB OR NOT TROUPE_CBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev (tools/dev does)")
endif()
add_library(troupe_blas INTERFACE)
target_link_libraries(troupe_blas INTERFACE ${TROUPE_OPENBLAS_LIB})
target_include_directories(troupe_blas SYSTEM INTERFACE ${TROUPE_CBLAS_INCLUDE})

# CAF 0.17 ships no CMake config (reference/measured-anchors.md, pitfall 1).
find_path(TROUPE_CAF_INCLUDE caf/all.hpp)
find_library(TROUPE_CAF_CORE caf_core)
find_library(TROUPE_CAF_IO caf_io)
if(TROUPE_CAF_INCLUDE AND TROUPE_CAF_CORE AND TROUPE_CAF_IO)
  add_library(troupe_caf INTERFACE)
  target_include_directories(troupe_caf SYSTEM INTERFACE ${TROUPE_CAF_INCLUDE})
  target_link_libraries(troupe_caf INTERFACE ${TROUPE_CAF_IO} ${TROUPE_CAF_CORE} OpenSSL::Crypto
                        Threads::Threads)
endif()

# CUDA is optional. No CUDA kernels exist yet (kernels/README.md): the build says what it found
# and builds the CPU kernels either way, so that nothing pretends to run on a GPU.
if(TROUPE_CUDA STREQUAL "AUTO" OR TROUPE_CUDA)
  find_program(TROUPE_NVCC nvcc PATHS /usr/local/cuda/bin)
  if(TROUPE_NVCC)
    message(STATUS "troupe: nvcc found (${TROUPE_NVCC}); no CUDA kernels are written yet")
  elseif(NOT TROUPE_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "TROUPE_CUDA=ON but nvcc was not found")
  endif()
endif()
