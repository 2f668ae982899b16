# One CTest test per GoogleTest suite (Suite.*), not per test case: every process of a test binary
# loads LibTorch (about a second on the 2-core machine), which per case was a large part of the
# whole ctest time. The suites are listed after each build (POST_BUILD, as gtest_discover_tests
# does) into a file CTest includes; a suite's cases run in one process, each still named in its
# output and its failure.
#
#   tc_gtest_suites(target LABELS unit [resilience ...] [TIMEOUT seconds])
#
# No suite declares a COST: the measured seconds of every test are in ci/test-costs.txt, which a new
# build directory starts from (cmake/TorchConformTests.cmake), so that a fresh CTest starts the long
# ones first.
function(tc_gtest_suites target)
  cmake_parse_arguments(A "" "TIMEOUT" "LABELS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 1500)
  endif()
  string(REPLACE ";" "," labels "${A_LABELS}")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DLABELS=${labels}
                             -DTIMEOUT=${A_TIMEOUT} -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}
                             -P ${PROJECT_SOURCE_DIR}/cmake/gtest_suites_discover.cmake
                     BYPRODUCTS ${out} VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${out})
endfunction()
