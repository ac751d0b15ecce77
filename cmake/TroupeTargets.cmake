# troupe_expose(target folder): lets code that links `target` write #include "folder/x.h", and
# nothing else of the source tree. The symlink lives in the build tree, one per folder.
function(troupe_expose target folder)
  set(dir ${CMAKE_BINARY_DIR}/expose/${folder})
  file(MAKE_DIRECTORY ${dir})
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${folder} ${dir}/${folder} SYMBOLIC)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${dir}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${dir}>)
  endif()
endfunction()
