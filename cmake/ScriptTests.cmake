# Tests of the scripts beside the binary (ci/nightly, the GPU bundle's run.sh and bundle.py) and of
# the JSON documents `ab` and `qualify` write, against their committed schemas. Included at the end
# of cmake/TorchConformTests.cmake (TC_TEST_OUT, TC_PYTHON, TC_TEST_PYTHON and the torchconform target are set).

# ci/nightly on a tiny matrix, against this build (TC_NIGHTLY_BIN: no set-up, no build): three runs
# in a temporary history with a temporary baseline: baseline created (exit 0), gated and passed
# (exit 0), then every step 50 ms slower: a regression named, exit 1. About 30-60 s.
add_test(NAME scripts.nightly
         COMMAND ${CMAKE_COMMAND} -E env PYTHON=${TC_TEST_PYTHON}
                 bash ${PROJECT_SOURCE_DIR}/ci/tests/nightly_test.sh $<TARGET_FILE_DIR:torchconform>)
set_tests_properties(scripts.nightly PROPERTIES LABELS "unit;bench" TIMEOUT 600
                     ENVIRONMENT "TORCHCONFORM_BENCH_SLOWDOWN_MS=")

# The GPU bundle's run.sh refuses (exit 2, with the reason) bad usage, a damaged bundle, another
# torch, glibc too old, an unresolved library, no CUDA device: on fake bundles, no second build.
# Needs a python with torch (the probe imports it).
if(TC_PYTHON)
  add_test(NAME scripts.gpu_bundle_refusals
           COMMAND bash ${PROJECT_SOURCE_DIR}/ci/tests/gpu_bundle_test.sh ${TC_PYTHON})
  set_tests_properties(scripts.gpu_bundle_refusals PROPERTIES LABELS unit TIMEOUT 300)
endif()

# bundle.py's merge, summary, verify, checks and sweep on small fixtures (standard library).
add_test(NAME scripts.bundle_py COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/tests/test_bundle_py.py)
set_tests_properties(scripts.bundle_py PROPERTIES LABELS unit TIMEOUT 120)
# ci/cost-drift: the drift report, --strict, and --write keeping registered tests, dropping gone ones.
add_test(NAME scripts.cost_drift COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/tests/test_cost_drift.py)
set_tests_properties(scripts.cost_drift PROPERTIES LABELS unit TIMEOUT 120)
# ci/failure-digest: a failed test's assertions, found in a long output, named from the JUnit file.
add_test(NAME scripts.failure_digest COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/tests/test_failure_digest.py)
set_tests_properties(scripts.failure_digest PROPERTIES LABELS unit TIMEOUT 120)

# The JSON of real `ab` and `qualify` runs validated against reports/schema/ (python-jsonschema),
# then broken copies of it rejected (--self-test; it needs a benchmark / a figure to break, so an
# empty document fails too). The files come from the tests that set up the fixtures: ab_json
# (cli.ab_same_binary_passes writes ab-same.json) and qualify_json (cli.qualify_cpu_2_ranks_none_flagged,
# in suites/qualify_probes/, writes qualify-pass.json). No PASS_REGULAR_EXPRESSION: ctest would then ignore
# the exit code.
if(TC_PYTHON)
  add_test(NAME report.ab_json_matches_schema
           COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_json.py
                   ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.ab-1.schema.json ${TC_TEST_OUT}/ab-same.json
                   --self-test)
  set_tests_properties(report.ab_json_matches_schema PROPERTIES LABELS "bench;unit" FIXTURES_REQUIRED ab_json)
  # ab --time instructions' document (cli.ab_instructions_catches_one_percent), with the simulated
  # cache misses beside the counts.
  add_test(NAME report.ab_instructions_json_matches_schema
           COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_json.py
                   ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.ab-1.schema.json
                   ${TC_TEST_OUT}/ab-instructions.json --self-test)
  set_tests_properties(report.ab_instructions_json_matches_schema PROPERTIES LABELS "bench;unit"
                       FIXTURES_REQUIRED ab_instructions_json)
  add_test(NAME report.qualify_json_matches_schema
           COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_json.py
                   ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.qualify-2.schema.json
                   ${TC_TEST_OUT}/qualify-pass.json --self-test)
  set_tests_properties(report.qualify_json_matches_schema PROPERTIES LABELS multi FIXTURES_REQUIRED qualify_json)
endif()
