# What `cmake --install` puts under the prefix, so that programs outside this repository use
# troupe as they use Eigen or CAF: libtroupe, the headers (include/troupe/<folder>/*.h, the
# umbrella include/troupe/troupe.h), the troupe command, a CMake package (find_package(troupe),
# troupe::troupe) and a pkg-config file. `cpack -G DEB` makes a .deb of the same.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TROUPE_INCLUDE_DIR ${CMAKE_INSTALL_INCLUDEDIR}/troupe)
# Installed, "runtime/tensor.h" resolves in include/troupe and <troupe/troupe.h> in include.
target_include_directories(troupe INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${TROUPE_INCLUDE_DIR}>)
target_link_libraries(troupe INTERFACE
  "$<INSTALL_INTERFACE:troupe::caf;CapnProto::capnp;Threads::Threads>")
set_target_properties(troupe PROPERTIES VERSION ${PROJECT_VERSION}
                                        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})

install(TARGETS troupe EXPORT troupeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${TROUPE_INCLUDE_DIR})
install(TARGETS troupe_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/troupe/troupe.h DESTINATION ${TROUPE_INCLUDE_DIR})
# kernels/ is reached through the registry only (DESIGN.md §2): its headers stay private.
foreach(folder runtime ops actors estimators)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${TROUPE_INCLUDE_DIR}/${folder}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY ${CMAKE_BINARY_DIR}/expose/schema/schema/ DESTINATION ${TROUPE_INCLUDE_DIR}/schema
        FILES_MATCHING PATTERN "*.capnp.h")

install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/troupe)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/troupeConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/troupeConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/troupe)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/troupeConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/troupeConfig.cmake ${CMAKE_BINARY_DIR}/troupeConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/troupe)
configure_file(${PROJECT_SOURCE_DIR}/cmake/troupe.pc.in ${CMAKE_BINARY_DIR}/troupe.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/troupe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_PACKAGE_NAME troupe)
set(CPACK_PACKAGE_VENDOR troupe)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "An actor-model dataflow runtime for machine learning")
set(CPACK_PACKAGE_CONTACT "troupe developers")
# What libtroupe and the troupe command load (ldd build/tools/troupe), and the headers a
# program built against the installed headers includes.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libcaf-dev (>= 0.17), libcapnp-dev, libopenblas0-pthread, zlib1g, libssl3, libprotobuf32, \
libboost-program-options1.74.0, libsimdjson14, libpng16-16, libjpeg62-turbo, libgrpc++1.51")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
include(CPack)
