# Writes build/generated/tc_version.cpp with the version and the git commit, re-run on every build
# but only touching the file when the commit changes (no rebuild on a no-op build).
set(TC_VERSION_CPP ${CMAKE_BINARY_DIR}/generated/tc_version.cpp)
add_custom_target(tc_version_gen
  COMMAND ${CMAKE_COMMAND} -DOUT=${TC_VERSION_CPP} -DSRC=${CMAKE_SOURCE_DIR}
          -DVERSION=${PROJECT_VERSION} -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
          -P ${CMAKE_SOURCE_DIR}/cmake/write_version.cmake
  BYPRODUCTS ${TC_VERSION_CPP}
  COMMENT "" VERBATIM)
