# Unit tests (label unit), CLI tests, the report-schema test and the conformance matrix as CTest
# tests (label conformance; CUDA cells also cuda, skipped with the reason on a machine without a GPU).
include(GoogleTest)

set(TC_TEST_OUT ${CMAKE_BINARY_DIR}/test-output)
file(MAKE_DIRECTORY ${TC_TEST_OUT})

# --- unit tests -------------------------------------------------------------------------------
add_executable(tc_harness_tests
  harness/tests/registry_test.cpp
  harness/tests/report_json_test.cpp
  harness/tests/runner_test.cpp)
target_link_libraries(tc_harness_tests PRIVATE tc_harness GTest::gtest_main)
tc_torch_link_fixups(tc_harness_tests)
gtest_discover_tests(tc_harness_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 120)

add_executable(tc_reference_tests reference/tests/reference_test.cpp)
target_link_libraries(tc_reference_tests PRIVATE tc_reference tc_check_support GTest::gtest_main)
tc_use_torch_pch(tc_reference_tests)
tc_torch_link_fixups(tc_reference_tests)
gtest_discover_tests(tc_reference_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 120)

# The suites linked in with every registration: teeth of the checks themselves.
add_executable(tc_suite_tests suites/teeth_test.cpp)
target_link_libraries(tc_suite_tests PRIVATE ${TC_SUITE_TARGETS} tc_reference tc_check_support GTest::gtest_main)
tc_use_torch_pch(tc_suite_tests)
tc_torch_link_fixups(tc_suite_tests)
gtest_discover_tests(tc_suite_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 120)

# --- CLI: exit codes and messages ---------------------------------------------------------------
function(tc_cli_test name exit_code regex)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=${exit_code} -DEXPECT_REGEX=${regex}
                   -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake -- $<TARGET_FILE:torchconform> ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS unit SKIP_REGULAR_EXPRESSION "^SKIP:")
endfunction()
tc_cli_test(help 0 "Exit codes" --help)
tc_cli_test(run_help 0 "--device" run --help)
tc_cli_test(unknown_flag 2 "--bogus" run --bogus)
tc_cli_test(no_subcommand 2 "subcommand" "")
tc_cli_test(unknown_device 2 "unknown device 'tpu'" run --device tpu)
tc_cli_test(unknown_check 2 "unknown check 'nope'" run --check nope)
tc_cli_test(unknown_recipe 2 "unknown recipe 'nope'" run --recipe nope)
tc_cli_test(cuda_missing 2 "no CUDA device" run --device cuda --check eval_mode --recipe reference
            --json ${TC_TEST_OUT}/never.json)
tc_cli_test(report_missing_file 2 "cannot read report" report ${TC_TEST_OUT}/does-not-exist.json
            --html ${TC_TEST_OUT}/x.html)
set_tests_properties(cli.cuda_missing PROPERTIES ENVIRONMENT "TC_SKIP_IF_CUDA=1")

# --- report JSON validated against the committed schema (python-jsonschema) ----------------------
add_test(NAME report.generate
         COMMAND torchconform run --device all --check reproducibility,eval_mode
                 --recipe reference,no_seed,no_eval --json ${TC_TEST_OUT}/schema-run.json
                 --html ${TC_TEST_OUT}/schema-run.html)
set_tests_properties(report.generate PROPERTIES LABELS unit FIXTURES_SETUP report_json)
add_test(NAME report.matches_schema
         COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_report.py
                 ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.report-1.schema.json
                 ${TC_TEST_OUT}/schema-run.json --self-test)
set_tests_properties(report.matches_schema PROPERTIES LABELS unit FIXTURES_REQUIRED report_json)
add_test(NAME report.html_from_json
         COMMAND torchconform report ${TC_TEST_OUT}/schema-run.json --html ${TC_TEST_OUT}/rerendered.html)
set_tests_properties(report.html_from_json PROPERTIES LABELS unit FIXTURES_REQUIRED report_json)

# --- the conformance matrix, one CTest test per cell, discovered from `torchconform list --json` --
set(TC_BINARY $<TARGET_FILE:torchconform>)
configure_file(${PROJECT_SOURCE_DIR}/cmake/conformance_tests.cmake.in
               ${CMAKE_BINARY_DIR}/conformance_tests.cmake.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/conformance_tests.cmake
     INPUT ${CMAKE_BINARY_DIR}/conformance_tests.cmake.gen)
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/conformance_tests.cmake)

# --- a user's own recipe: install, build examples/user_recipe against the package, run it -------
get_filename_component(TC_TORCH_CMAKE_PREFIX "${Torch_DIR}" DIRECTORY)  # .../share/cmake
add_test(NAME example.user_recipe
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK=${TC_TEST_OUT}/user_recipe -DGENERATOR=${CMAKE_GENERATOR}
                 -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 -DTORCH_PREFIX=${TC_TORCH_CMAKE_PREFIX} -DLAUNCHER=${CCACHE_PROGRAM}
                 -DSTOCK_BINARY=$<TARGET_FILE:torchconform> -DPYTHON=${TC_PYTHON}
                 -P ${PROJECT_SOURCE_DIR}/cmake/example_test.cmake)
set_tests_properties(example.user_recipe PROPERTIES LABELS example TIMEOUT 1500)
