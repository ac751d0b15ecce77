# The consumer example as a user builds it: this build installed into a prefix of its own, then
# examples/consumer configured against it with find_package(troupe), built and run; and a
# program compiled with pkg-config's flags alone. Run by CTest (tests/CMakeLists.txt) with
# BUILD_DIR, SOURCE_DIR and WORK_DIR set.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/troupe/troupe.h include/troupe/runtime/tensor.h
          include/troupe/schema/tensor.capnp.h lib/cmake/troupe/troupeConfig.cmake
          lib/pkgconfig/troupe.pc bin/troupe)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "cmake --install left out ${f}")
  endif()
endforeach()

run("configuring examples/consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer
    -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run("building examples/consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run("running the consumer" ${WORK_DIR}/consumer/consumer)
if(NOT last_output MATCHES "\"export_predicts_the_same\": true")
  message(FATAL_ERROR "the consumer said: ${last_output}")
endif()
message(STATUS "consumer: ${last_output}")

# pkg-config alone: the flags it gives compile and link a program against the prefix.
file(WRITE ${WORK_DIR}/pc.cc "#include <troupe/troupe.h>\n#include <cstdio>\n"
     "int main() { std::puts(troupe::runtime::dtype_name(troupe::runtime::DType::kFloat32)); }\n")
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run("pkg-config" pkg-config --cflags --libs troupe)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run("compiling with pkg-config's flags" c++ ${WORK_DIR}/pc.cc -o ${WORK_DIR}/pc ${flags}
    -Wl,-rpath,${prefix}/lib)
run("running the pkg-config program" ${WORK_DIR}/pc)
if(NOT last_output MATCHES "float32")
  message(FATAL_ERROR "the pkg-config program said: ${last_output}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
