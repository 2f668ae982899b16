# Unit tests (label unit), CLI tests, the report-schema test and the conformance matrix as CTest
# tests (label conformance; CUDA cells also cuda, skipped with the reason on a machine without a GPU).
include(GoogleTest)
include(${PROJECT_SOURCE_DIR}/cmake/TorchConformGTest.cmake)

set(TC_TEST_OUT ${CMAKE_BINARY_DIR}/test-output)
# The Python the tests run (the venv's, with jsonschema), or python3 where none was configured.
if(TC_PYTHON)
  set(TC_TEST_PYTHON ${TC_PYTHON})
else()
  set(TC_TEST_PYTHON python3)
endif()
file(MAKE_DIRECTORY ${TC_TEST_OUT})
# Each test's measured seconds (ci/test-costs.txt, written by `ci/cost-drift --write` from a full
# quiet run): a new build directory starts with them as CTest's cost data, so that a fresh ctest -j
# starts the longest tests first instead of finding them last; CTest keeps the file up to date from
# then on. (A declared COST property would override the measured figure; no test declares one.)
set(_tc_cost_data ${CMAKE_BINARY_DIR}/Testing/Temporary/CTestCostData.txt)
if(NOT EXISTS ${_tc_cost_data} AND EXISTS ${PROJECT_SOURCE_DIR}/ci/test-costs.txt)
  file(STRINGS ${PROJECT_SOURCE_DIR}/ci/test-costs.txt _tc_costs REGEX "^[^#]")
  list(JOIN _tc_costs "\n" _tc_costs)
  file(WRITE ${_tc_cost_data} "${_tc_costs}\n")
endif()
# Where the tests find the source and build trees and their Python: one small library carries the
# paths (harness/testing/test_paths.h), so no test translation unit compiles an absolute path and a
# clone in another folder hits the compiler cache for all of them.
add_library(tc_test_paths STATIC harness/testing/tree_paths.cpp)
target_include_directories(tc_test_paths PUBLIC ${PROJECT_SOURCE_DIR})
target_compile_definitions(tc_test_paths PRIVATE TC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TC_BINARY_DIR="${CMAKE_BINARY_DIR}"
                                                 TC_TEST_PYTHON="${TC_TEST_PYTHON}" TC_BINARY="$<TARGET_FILE:torchconform>"
                                                 TC_TRAINER="$<TARGET_FILE:tc_ddp_trainer>")

# --- unit tests -------------------------------------------------------------------------------
# The contract: registration and its builder.
add_executable(tc_contract_tests harness/contract/tests/registry_test.cpp)
target_link_libraries(tc_contract_tests PRIVATE tc_contract GTest::gtest_main)
tc_torch_link_fixups(tc_contract_tests)
tc_gtest_suites(tc_contract_tests LABELS unit)

# The utilities, without LibTorch (harness/util is a leaf library).
add_executable(tc_util_tests harness/util/tests/util_test.cpp harness/util/tests/median_interval_test.cpp
                             harness/util/tests/statistics_test.cpp harness/tests/test_paths_test.cpp)
target_link_libraries(tc_util_tests PRIVATE tc_util tc_test_paths nlohmann_json::nlohmann_json GTest::gtest_main)
tc_gtest_suites(tc_util_tests LABELS unit)

add_executable(tc_harness_tests
  harness/ab/tests/ab_test.cpp
  harness/ab/tests/turns_test.cpp
  harness/tests/approval_test.cpp
  harness/tests/bench_test.cpp
  harness/tests/child_process_test.cpp
  harness/tests/compare_numerics_test.cpp
  harness/tests/compare_test.cpp
  harness/tests/instructions_test.cpp
  harness/qualify/tests/assess_test.cpp
  harness/tests/report_json_test.cpp
  harness/tests/runner_test.cpp
  harness/tests/trend_test.cpp)
target_link_libraries(tc_harness_tests PRIVATE tc_harness tc_cli tc_test_paths GTest::gtest_main)
tc_torch_link_fixups(tc_harness_tests)
tc_gtest_suites(tc_harness_tests LABELS unit)

# The Python bridge (python/bridge), where it is built: Python recipes through tc::Run.
if(TC_PYTHON_EMBED_BUILT)
  add_executable(tc_python_bridge_tests python/bridge/tests/bridge_test.cpp python/bridge/tests/compile_probe_test.cpp
                 python/bridge/tests/data_parallel_probe_test.cpp)
  target_link_libraries(tc_python_bridge_tests PRIVATE tc_test_paths tc_python_bridge tc_python_embed GTest::gtest_main)
  target_compile_options(tc_python_bridge_tests PRIVATE ${TORCH_CXX_FLAGS})
  tc_torch_link_fixups(tc_python_bridge_tests)
  tc_gtest_suites(tc_python_bridge_tests LABELS unit)
  # `run --python` through the command line, with two checks of its own (python/bridge/tests/cli_test.cpp).
  add_executable(tc_python_cli_tests python/bridge/tests/cli_test.cpp)
  target_link_libraries(tc_python_cli_tests PRIVATE tc_test_paths tc_python_register tc_python_embed tc_cli tc_harness GTest::gtest_main)
  target_compile_options(tc_python_cli_tests PRIVATE ${TORCH_CXX_FLAGS})
  tc_torch_link_fixups(tc_python_cli_tests)
  tc_gtest_suites(tc_python_cli_tests LABELS unit)
  # The Python reference against the C++ one, 20 losses bitwise (python/bridge/tests/reference_parity_test.cpp).
  add_executable(tc_python_parity_tests python/bridge/tests/reference_parity_test.cpp)
  target_link_libraries(tc_python_parity_tests PRIVATE tc_test_paths tc_python_bridge tc_python_embed tc_reference_recipe GTest::gtest_main)
  target_compile_options(tc_python_parity_tests PRIVATE ${TORCH_CXX_FLAGS})
  tc_torch_link_fixups(tc_python_parity_tests)
  tc_gtest_suites(tc_python_parity_tests LABELS unit)
  # A correct recipe written differently: one-channel images, where channels_last is contiguous
  # (shapes must find another non-contiguous layout and pass it, not error).
  add_test(NAME shapes.grayscale_recipe_passes
           COMMAND torchconform run --device cpu --python ${PROJECT_SOURCE_DIR}/python/tests/grayscale_run.py:GrayscaleRun
                   --check shapes --recipe grayscale_run --html "")
  set_tests_properties(shapes.grayscale_recipe_passes PROPERTIES LABELS "unit;python" TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "ok +shapes / grayscale_run / cpu.*summary: error=0 fail=0 false_alarm=0 missed=0 ok=1")
  # The embedded interpreter's standard library is its own whatever `python3` comes first on PATH
  # (a decoy prefix whose standard library refuses to load): before the fix, an activated venv or
  # pyenv of another 3.11 build made every Python recipe's train_step raise (python/bridge/interpreter.cpp).
  add_test(NAME python.foreign_python_on_path
           COMMAND sh ${PROJECT_SOURCE_DIR}/python/tests/foreign_python_on_path.sh $<TARGET_FILE:torchconform>
                   ${PROJECT_SOURCE_DIR}/python/tests/grayscale_run.py:GrayscaleRun grayscale_run
                   ${TC_TEST_OUT}/foreign-python-on-path.json)
  set_tests_properties(python.foreign_python_on_path PROPERTIES LABELS "unit;python" TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "summary: error=0 fail=0 false_alarm=0 missed=0 ok=1")
  # An FSDP recipe written apart from py_reference (an MLP split unevenly over the ranks, AdamW,
  # DistributedSampler, get_state_dict/set_state_dict, the file written in place and mapped back):
  # its fsdp cell ok with every promise held (none merely recorded). Two ranks under torchrun.
  add_test(NAME fsdp.mlp_recipe_passes
           COMMAND ${CMAKE_COMMAND} -E env TC_CELL_JSON=${TC_TEST_OUT}/fsdp-mlp.json
                   sh -c "\"$1\" run --device cpu --python \"$2\" --check fsdp --recipe fsdp_mlp_run --json \"$TC_CELL_JSON\" --html '' && \"$3\" \"$4\" \"$TC_CELL_JSON\" held" sh
                   $<TARGET_FILE:torchconform> ${PROJECT_SOURCE_DIR}/python/tests/fsdp_mlp_run.py:FsdpMlpRun
                   ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/cell_promises.py)
  set_tests_properties(fsdp.mlp_recipe_passes PROPERTIES LABELS "unit;python;multi" TIMEOUT 300 PROCESSORS 2)
endif()

add_executable(tc_reference_tests reference/tests/reference_test.cpp reference/tests/grad_scaler_test.cpp)
target_link_libraries(tc_reference_tests PRIVATE tc_reference tc_check_support GTest::gtest_main)
tc_use_torch_pch(tc_reference_tests)
tc_torch_link_fixups(tc_reference_tests)
tc_gtest_suites(tc_reference_tests LABELS unit)

# The suites linked in with every registration: teeth of the checks themselves, and checks run on
# correct recipes written otherwise than the reference. Its main is also the command line (a check's
# fresh process starts the binary it runs in again: suites/suite_binary_main.cpp).
add_executable(tc_suite_tests suites/teeth_test.cpp suites/suite_binary_main.cpp
  suites/eval_mode/correct_recipes_test.cpp
  suites/init/correct_recipes_test.cpp
  suites/reproducibility/correct_recipes_test.cpp
  suites/distributed/correct_recipes_test.cpp
  suites/tests/slots_test.cpp
  suites/tests/hostile_test.cpp
  suites/tests/replaces_test.cpp)
target_link_libraries(tc_suite_tests PRIVATE ${TC_SUITE_TARGETS} tc_reference tc_check_support tc_cli tc_harness GTest::gtest)
tc_use_torch_pch(tc_suite_tests)
tc_torch_link_fixups(tc_suite_tests)
tc_gtest_suites(tc_suite_tests LABELS unit)

# A variant that breaks nothing, run through the command line (tc_suite_tests run adds the tests'
# recipes): `missed` in the matrix and exit 1.
add_test(NAME cli.uncaught_variant_exits_1
         COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=1
                 "-DEXPECT_REGEX=harmless_for_eval_mode +missed\\*.*missed=1.*missed +eval_mode / harmless_for_eval_mode / cpu"
                 -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake -- $<TARGET_FILE:tc_suite_tests> run --device cpu
                 --check eval_mode --recipe harmless_for_eval_mode --json ${TC_TEST_OUT}/uncaught.json
                 --html ${TC_TEST_OUT}/uncaught.html)
set_tests_properties(cli.uncaught_variant_exits_1 PROPERTIES LABELS unit)

# The checks on recipes registered only in these tests: correct code written differently passes,
# each blind spot's broken recipe is caught, a precondition is named instead of another promise.
add_executable(tc_check_tests suites/step_hygiene/step_hygiene_test.cpp suites/amp/amp_diagnosis_test.cpp
                              suites/amp/speed_judge_test.cpp
                              suites/device_agnostic/judge_test.cpp suites/data_saturation/judge_test.cpp
                              suites/checkpoint_safety/checkpoint_safety_test.cpp
                              suites/support/tests/fingerprint_test.cpp suites/reproducibility/divergence_test.cpp
                              suites/autograd_inplace/autograd_inplace_test.cpp
                              suites/tests/written_differently_test.cpp suites/generated/generated_test.cpp)
target_link_libraries(tc_check_tests PRIVATE tc_test_paths ${TC_SUITE_TARGETS} tc_reference tc_check_support tc_harness GTest::gtest_main)
tc_use_torch_pch(tc_check_tests)
tc_torch_link_fixups(tc_check_tests)
tc_gtest_suites(tc_check_tests LABELS unit)

# --- CLI: exit codes and messages ---------------------------------------------------------------
function(tc_cli_test name exit_code regex)
  add_test(NAME cli.${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=${exit_code} -DEXPECT_REGEX=${regex}
                   -P ${PROJECT_SOURCE_DIR}/cmake/expect_exit.cmake -- $<TARGET_FILE:torchconform> ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS unit SKIP_REGULAR_EXPRESSION "^SKIP:")
endfunction()
tc_cli_test(help 0 "Exit codes" --help)
tc_cli_test(run_help 0 "--device" run --help)
tc_cli_test(run_help_sweep 0 "--sweep" run --help)
# The suite's reference is a control (->Control()), exported as data; a user's recipe would be a subject.
tc_cli_test(list_reference_is_a_control 0 "\"name\": \"reference\",[^}]*\"role\": \"reference\"" list --json)
tc_cli_test(unknown_flag 2 "--bogus" run --bogus)
tc_cli_test(no_subcommand 2 "subcommand" "")
tc_cli_test(unknown_device 2 "unknown device 'tpu'" run --device tpu)
tc_cli_test(unknown_check 2 "unknown check 'nope'" run --check nope)
tc_cli_test(unknown_recipe 2 "unknown recipe 'nope'" run --recipe nope)
tc_cli_test(part_needs_one_cell 2 "--part runs a part of one cell" run --part same_seed_run --check reproducibility)
tc_cli_test(cuda_missing 2 "no CUDA device" run --device cuda --check eval_mode --recipe reference
            --json ${TC_TEST_OUT}/never.json)
# Nothing checked (a variant whose practice shows only where CUDA exists, on a machine without it):
# 77, which the conformance ctests read as skipped (SKIP_RETURN_CODE), not 0.
tc_cli_test(all_cells_skipped 77 "skipped" run --device cpu --check device_agnostic --recipe mixed_devices
            --json ${TC_TEST_OUT}/all-skipped.json --html ${TC_TEST_OUT}/all-skipped.html)
# A check of Python recipes only, asked for a C++ recipe alone: no cell at all, and the reason (exit 2).
tc_cli_test(no_cell_for_the_recipes_language 2 "nothing to run: no check given judges the recipes given; fsdp: the check judges Python recipes only"
            run --device cpu --check fsdp --recipe reference --json ${TC_TEST_OUT}/never.json)
tc_cli_test(report_missing_file 2 "cannot read report" report ${TC_TEST_OUT}/does-not-exist.json
            --html ${TC_TEST_OUT}/x.html)
set_tests_properties(cli.cuda_missing PROPERTIES ENVIRONMENT "TC_SKIP_IF_CUDA=1")
tc_cli_test(run_bad_thread_count 2 "TORCHCONFORM_THREADS='many' is not a thread count" run --device cpu
            --check eval_mode --recipe reference --json ${TC_TEST_OUT}/never.json --html ${TC_TEST_OUT}/never.html)
set_tests_properties(cli.run_bad_thread_count PROPERTIES ENVIRONMENT "TORCHCONFORM_THREADS=many")

# The README's one line per check equals `torchconform list --json` (names and promises);
# `ci/readme-checks build/torchconform README.md --write` rewrites the block.
add_test(NAME docs.readme_checks
         COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/readme-checks $<TARGET_FILE:torchconform>
                 ${PROJECT_SOURCE_DIR}/README.md)
set_tests_properties(docs.readme_checks PROPERTIES LABELS unit)

# The manual is true: every repository path, page and code name that README.md, docs/ and the
# sources' comments mention exists (ci/check-docs); the self-test feeds it made-up stale references.
add_test(NAME docs.references_exist COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/check-docs ${PROJECT_SOURCE_DIR})
add_test(NAME docs.references_rule_catches_stale_ones COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/check-docs --self-test)
set_tests_properties(docs.references_exist docs.references_rule_catches_stale_ones PROPERTIES LABELS unit)

# compare / trend: gate by exit code on committed inputs (real Google Benchmark 1.7.1 output)
set(TC_FIX ${PROJECT_SOURCE_DIR}/harness/tests/fixtures)
tc_cli_test(compare_gbench_regression 1 "BM_Sleep/iterations:20 .*REGRESSION.*gate: FAIL"
            compare ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_slow.json --html ${TC_TEST_OUT}/compare-gbench.html)
tc_cli_test(compare_same_passes 0 "gate: PASS" compare ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_base.json)
tc_cli_test(compare_metric_threshold_lets_it_pass 0 "gate: PASS" compare ${TC_FIX}/gbench_base.json
            ${TC_FIX}/gbench_slow.json --metric-threshold BM_Sleep/iterations:20=50%)
tc_cli_test(compare_missing_file 2 "cannot read report '[^']*nope.json'" compare ${TC_FIX}/gbench_base.json
            ${TC_TEST_OUT}/nope.json)
tc_cli_test(compare_other_schema 2 "other_schema.json': report schema is 'torchconform.report/2'"
            compare ${TC_FIX}/other_schema.json ${TC_FIX}/gbench_base.json)
tc_cli_test(compare_not_json 2 "gbench_fixture_program.cpp' is not valid JSON"
            compare ${TC_FIX}/gbench_fixture_program.cpp ${TC_FIX}/gbench_base.json)
# Bad input: exit 2 and the HTML already at --html is left as it was.
add_test(NAME cli.compare_bad_input_keeps_html
         COMMAND ${CMAKE_COMMAND} -DTC=$<TARGET_FILE:torchconform> -DFIX=${TC_FIX} -DOUT=${TC_TEST_OUT}
                 -P ${PROJECT_SOURCE_DIR}/harness/tests/compare_keeps_output.cmake)
set_tests_properties(cli.compare_bad_input_keeps_html PROPERTIES LABELS unit)
tc_cli_test(compare_bad_threshold 2 "not a percentage" compare ${TC_FIX}/gbench_base.json
            ${TC_FIX}/gbench_base.json --threshold lots)
# compare --numerics: training fingerprints (harness/tests/make_numerics_fixtures.py writes the fixtures).
tc_cli_test(compare_numerics_identical_passes_strict 0 "2 cell\\(s\\) with a training fingerprint: 2 identical.*gate: PASS"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_base.json --numerics strict)
tc_cli_test(compare_numerics_off_reports_a_divergence 0
            "diverged +eval_mode / reference / cpu: step 4 beyond 0.09766%: loss 1.18040872 vs 1.18513036.*gate: PASS"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_diverged.json
            --html ${TC_TEST_OUT}/compare-numerics.html)
tc_cli_test(compare_numerics_tolerant_fails_a_divergence 1 "DIVERGED +eval_mode.*gate: FAIL .*1 numerics failure"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_diverged.json --numerics tolerant)
tc_cli_test(compare_numerics_tolerant_passes_drift 0
            "drifted +eval_mode / reference / cpu: largest relative difference [^;]*; first step beyond float rounding: 3.*gate: PASS"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_drifted.json --numerics tolerant)
tc_cli_test(compare_numerics_strict_fails_drift 1 "DRIFTED +eval_mode.*gate: FAIL"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_drifted.json --numerics strict)
tc_cli_test(compare_numerics_tolerance_flag 1 "DIVERGED +eval_mode / reference / cpu: step 3 beyond 1e-05%"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_drifted.json --numerics tolerant
            --numerics-tolerance 0.00001%)
tc_cli_test(compare_numerics_older_report_not_recorded 0 "not_recorded +eval_mode / reference / cpu: no fingerprint in base.*gate: PASS"
            compare ${TC_FIX}/numerics_unrecorded.json ${TC_FIX}/numerics_base.json --numerics strict)
tc_cli_test(compare_numerics_unknown_mode 2 "--numerics 'loose' is not one of off"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_base.json --numerics loose)
tc_cli_test(compare_numerics_bad_tolerance 2 "'lots' is not a percentage"
            compare ${TC_FIX}/numerics_base.json ${TC_FIX}/numerics_base.json --numerics-tolerance lots)
tc_cli_test(trend_step_regression 1 "BM_Sleep/iterations:20 .*regression.*trend gate: FAIL" trend
            ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_slow.json
            ${TC_FIX}/gbench_slow.json ${TC_FIX}/gbench_slow.json --html ${TC_TEST_OUT}/trend.html)
tc_cli_test(trend_flat_passes 0 "trend gate: PASS" trend ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_base.json
            ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_base.json ${TC_FIX}/gbench_base.json)
tc_cli_test(bench_merge_into_bad_report 2 "other_schema.json': report schema is 'torchconform.report/2'"
            bench --json ${TC_FIX}/other_schema.json)
tc_cli_test(bench_unknown_flag 2 "unrecognized command-line flag" bench --benchmark_bogus=1)
tc_cli_test(bench_lists_train_step 0 "reference/train_step/device:cpu" bench --benchmark_list_tests)

# ab: bad input exits 2 with a sentence naming it (a failing child run: with its output's tail).
set(TC_EXE $<TARGET_FILE:torchconform>)
tc_cli_test(ab_missing_binary 2 "'[^']*nope' does not exist" ab ${TC_TEST_OUT}/nope ${TC_EXE})
tc_cli_test(ab_directory_without_binary 2 "the directory '[^']*' holds no torchconform binary" ab ${TC_EXE}
            ${TC_TEST_OUT})
tc_cli_test(ab_not_torchconform 2 "NEW '[^']*' is not a torchconform binary" ab ${TC_EXE} ${CMAKE_COMMAND})
tc_cli_test(ab_child_run_fails 2 "calibration: BASE .* bench failed .exit 2.*unrecognized command-line flag"
            ab ${TC_EXE} ${TC_EXE} --rounds 1 -- --benchmark_bogus=1)
tc_cli_test(ab_child_run_fails_pairing_run 2 "round 1: (BASE|NEW) .* bench failed .exit 2.*unrecognized command-line flag"
            ab ${TC_EXE} ${TC_EXE} --pairing run --rounds 1 -- --benchmark_bogus=1)
tc_cli_test(ab_bad_pairing 2 "--pairing: sideways not in" ab ${TC_EXE} ${TC_EXE} --pairing sideways)
tc_cli_test(bench_bad_iterations 2 "--iterations needs a whole number of at least 1, not '0'" bench --iterations 0)
tc_cli_test(bench_turns_without_ab 2 "--ab-turns [^ ]*no-such-dir: cannot open its pipes" bench
            --ab-turns ${TC_TEST_OUT}/no-such-dir --benchmark_filter=reference/train_step)
tc_cli_test(ab_nothing_matched 2 "bench failed .exit 2.*no benchmark matched" ab ${TC_EXE} ${TC_EXE} --rounds 1
            -- --benchmark_filter=no_such_benchmark)
tc_cli_test(ab_bad_env 2 "'NOEQUALS' is not VAR=VALUE" ab ${TC_EXE} ${TC_EXE} --new-env NOEQUALS)
tc_cli_test(ab_bad_threshold 2 "not a percentage" ab ${TC_EXE} ${TC_EXE} --threshold lots)
tc_cli_test(ab_no_rounds 2 "--rounds must be at least 1" ab ${TC_EXE} ${TC_EXE} --rounds 0)
# Short real runs (label bench: they measure), in both pairings: the binary against itself, and NEW
# slowed by the test hook by 15 ms a step (the step takes 2-6 ms of CPU time: 3.5x or more). 12
# rounds: the 95% interval of the median ratio is then the 3rd..10th smallest, so two disturbed
# rounds at either end decide nothing. On a loaded VM even a thread's CPU time varies by rounds
# (2026-12-01, load 2.3 on 2 cores: the same binary's round ratios 0.47-1.49, interval [0.73, 1.43];
# a 3 ms slowdown, 1.56x, came out inconclusive): the slowdown is made larger than that noise, and
# the same binary must come out without a verdict of change (no regression, no improvement;
# `unchanged` on a quiet machine, `inconclusive` under load), never a false one. The four share a
# lock so that they do not load each other. On failure expect_exit prints ab's report, whose header
# gives the load average at the rounds' start.
# Repetition pairing (the default): the two builds take turns within one bench each (about 10 s).
tc_cli_test(ab_same_binary_passes 0
            "pairing repetition: each round is one repetition of each build, the two running side by side and taking turns.*reference/train_step +cpu +ms +12 .*ab gate: PASS \\(0 regressed, [01] inconclusive, [01] unchanged, 0 improved"
            ab ${TC_EXE} ${TC_EXE} --rounds 12 --threshold 25% --time cpu
            --seed 3 --json ${TC_TEST_OUT}/ab-same.json --html ${TC_TEST_OUT}/ab-same.html
            -- --benchmark_filter=reference/train_step --benchmark_min_time=0.05)
set_tests_properties(cli.ab_same_binary_passes PROPERTIES FIXTURES_SETUP ab_json)
tc_cli_test(ab_slowed_new_is_a_regression 1 "reference/train_step .*REGRESSION.*ab gate: FAIL" ab ${TC_EXE}
            ${TC_EXE} --rounds 12 --time cpu --seed 3 --new-env TORCHCONFORM_BENCH_SLOWDOWN_MS=15
            -- --benchmark_filter=reference/train_step --benchmark_min_time=0.05)
# Two benchmarks, one with an argument: each started in its own pair of processes, 6 pairs each,
# named as in a plain bench report (without the iterations:N of the fixed count).
tc_cli_test(ab_pairs_each_benchmark 0
            "reference/train_step/device:cpu [0-9]+, amp/matmul_ceiling/fp32/device:cpu/256 [0-9]+\\).*reference/train_step +cpu +ms +6 .*amp/matmul_ceiling/fp32/device:cpu/256 +cpu +ms +6 "
            ab ${TC_EXE} ${TC_EXE} --rounds 6 --seed 3
            -- "--benchmark_filter=reference/train_step|amp/matmul_ceiling/fp32/device:cpu/256$" --benchmark_min_time=0.05)
# Run pairing: a round is a bench process of each (a few seconds each).
tc_cli_test(ab_same_binary_passes_pairing_run 0
            "pairing run: each round is a `bench [^`]*` of each build.*reference/train_step +cpu +ms +12 .*ab gate: PASS \\(0 regressed, [01] inconclusive, [01] unchanged, 0 improved"
            ab ${TC_EXE} ${TC_EXE} --pairing run --rounds 12 --threshold 25% --time cpu --seed 3
            -- --benchmark_filter=reference/train_step --benchmark_repetitions=1 --benchmark_min_time=0.05)
tc_cli_test(ab_slowed_new_is_a_regression_pairing_run 1 "reference/train_step .*REGRESSION.*ab gate: FAIL" ab
            ${TC_EXE} ${TC_EXE} --pairing run --rounds 12 --time cpu --seed 3 --new-env TORCHCONFORM_BENCH_SLOWDOWN_MS=15
            -- --benchmark_filter=reference/train_step --benchmark_repetitions=1 --benchmark_min_time=0.05)
# A time budget spent after the first round: no second round starts, and it says so (one pair is
# too few for an interval: inconclusive, which passes).
tc_cli_test(ab_time_budget_stops_rounds 0 "rounds: 1 of 50 .time budget spent.*inconclusive.*ab gate: PASS" ab
            ${TC_EXE} ${TC_EXE} --rounds 50 --time-budget 0.5
            -- --benchmark_filter=reference/train_step --benchmark_repetitions=1 --benchmark_min_time=0.05)
set_tests_properties(cli.ab_time_budget_stops_rounds cli.ab_pairs_each_benchmark PROPERTIES
                     LABELS "bench;unit" TIMEOUT 300 ENVIRONMENT "TORCHCONFORM_BENCH_SLOWDOWN_MS=")
# These four judge the thread's CPU time (--time cpu) of single-threaded steps (TORCHCONFORM_THREADS=1
# for both sides): then every second of a repetition's time is its own work, which busy neighbours do
# not lengthen (real time under a load of 4 on 2 cores: same-binary ratios 0.47..2.76, inconclusive).
set_tests_properties(cli.ab_same_binary_passes cli.ab_slowed_new_is_a_regression
                     cli.ab_same_binary_passes_pairing_run cli.ab_slowed_new_is_a_regression_pairing_run PROPERTIES
                     LABELS "bench;unit" TIMEOUT 300 RESOURCE_LOCK ab_timing
                     ENVIRONMENT "TORCHCONFORM_BENCH_SLOWDOWN_MS=;TORCHCONFORM_THREADS=1")

# ab --time instructions (harness/instructions.h): both builds counted under valgrind at once; NEW
# executes +1% of instructions per step (the extra-work hook: a fixed loop, 15 thousand rounds of 6
# instructions on a 9.05e6-instruction step) and is a regression beyond the 0.5% threshold, whatever
# the load; the counted rounds carry the simulated cache misses beside the counts. About 50 s of CPU
# per side (valgrind's start-up of LibTorch is most of it): 1-3 minutes on 2 cores. Its two valgrind
# processes hold two cores (PROCESSORS 2: on 2 cores nothing runs beside it; a first version without
# it starved example.user_recipe's data_saturation sweep, 6.8% wait against a 5% bar, in a CI
# rehearsal), and it takes the timing tests' lock on bigger machines.
tc_cli_test(ab_instructions_catches_one_percent 1
            "reference/train_step +cpu +instructions +6 .*REGRESSION.*ab gate: FAIL"
            ab ${TC_EXE} ${TC_EXE} --time instructions --new-env TORCHCONFORM_BENCH_EXTRA_WORK=15
            --json ${TC_TEST_OUT}/ab-instructions.json -- --benchmark_filter=^reference/train_step/)
set_tests_properties(cli.ab_instructions_catches_one_percent PROPERTIES LABELS "bench;unit" TIMEOUT 600
                     PROCESSORS 2 RESOURCE_LOCK ab_timing ENVIRONMENT "TORCHCONFORM_BENCH_SLOWDOWN_MS="
                     FIXTURES_SETUP ab_instructions_json)

# --- report JSON validated against the committed schema (python-jsonschema) ----------------------
add_test(NAME report.generate
         COMMAND torchconform run --device all --check reproducibility,eval_mode
                 --recipe reference,no_seed,no_eval --quick --json ${TC_TEST_OUT}/schema-run.json
                 --html ${TC_TEST_OUT}/schema-run.html)
set_tests_properties(report.generate PROPERTIES LABELS unit FIXTURES_SETUP report_json)
add_test(NAME report.matches_schema
         COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_report.py
                 ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.report-1.schema.json
                 ${TC_TEST_OUT}/schema-run.json --self-test)
set_tests_properties(report.matches_schema PROPERTIES LABELS unit FIXTURES_REQUIRED report_json)
add_test(NAME report.html_from_json
         COMMAND torchconform report ${TC_TEST_OUT}/schema-run.json --html ${TC_TEST_OUT}/rerendered.html)
set_tests_properties(report.html_from_json PROPERTIES LABELS unit FIXTURES_REQUIRED report_json
                     FIXTURES_SETUP report_rerendered)
# The page rendered again from the JSON alone is the page the run wrote: the JSON keeps everything
# the report shows.
add_test(NAME report.html_rerendered_is_the_same
         COMMAND ${CMAKE_COMMAND} -E compare_files ${TC_TEST_OUT}/schema-run.html ${TC_TEST_OUT}/rerendered.html)
set_tests_properties(report.html_rerendered_is_the_same PROPERTIES LABELS unit FIXTURES_REQUIRED "report_json;report_rerendered")

# The HTML report rendered by headless Chromium: its DOM holds every cell of the JSON; screenshot
# at build/test-output/report-screenshot.png. Chromium missing fails (CI installs it).
add_test(NAME report.html_in_chromium
         COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/check_html_dom.py ${TC_TEST_OUT}/bench-run.json
                 ${TC_TEST_OUT}/bench-run.html ${TC_TEST_OUT}/report-screenshot.png --expect-benchmarks)
set_tests_properties(report.html_in_chromium PROPERTIES LABELS unit FIXTURES_REQUIRED bench_json TIMEOUT 300)

# `bench`: a short real run of the benchmarks merged into a run report, then checked against the
# schema and rendered (label bench: it measures; unit: the plumbing is what is tested).
add_test(NAME bench.merge_into_report
         COMMAND ${CMAKE_COMMAND} -E env TORCHCONFORM_BENCH_SLOWDOWN_MS=
                 $<TARGET_FILE:torchconform> bench --json ${TC_TEST_OUT}/bench-run.json
                 --benchmark_min_time=0.05 --benchmark_repetitions=3
                 "--benchmark_filter=^(reference/train_step|amp/train_step/cnn/fp32|data/loader/workers:2/prefetch:2)")
# (Three benchmarks: one plain, one with user counters (TFLOP/s, MFU), one of the loader: every kind of
# record the report merges, in a tenth of the time all of them took; `cli.bench_lists_train_step`
# lists them all, and `ci/nightly` runs them all.)
set_tests_properties(bench.merge_into_report PROPERTIES LABELS "bench;unit" FIXTURES_REQUIRED bench_base
                     FIXTURES_SETUP bench_merged)
add_test(NAME bench.run_for_merge
         COMMAND torchconform run --device all --check reproducibility,eval_mode
                 --recipe reference,no_seed,no_eval --quick --json ${TC_TEST_OUT}/bench-run.json --html "")
set_tests_properties(bench.run_for_merge PROPERTIES LABELS "bench;unit" FIXTURES_SETUP bench_base)
add_test(NAME bench.report_matches_schema
         COMMAND ${TC_PYTHON} ${PROJECT_SOURCE_DIR}/harness/tests/validate_report.py
                 ${PROJECT_SOURCE_DIR}/reports/schema/torchconform.report-1.schema.json ${TC_TEST_OUT}/bench-run.json)
set_tests_properties(bench.report_matches_schema PROPERTIES LABELS "bench;unit" FIXTURES_REQUIRED bench_merged
                     PASS_REGULAR_EXPRESSION "valid \\([1-9][0-9]* cells\\)")
add_test(NAME bench.render_html
         COMMAND torchconform report ${TC_TEST_OUT}/bench-run.json --html ${TC_TEST_OUT}/bench-run.html)
set_tests_properties(bench.render_html PROPERTIES LABELS "bench;unit" FIXTURES_REQUIRED bench_merged
                     FIXTURES_SETUP bench_json)

# --- the conformance matrix, one CTest test per cell, discovered from `torchconform list --json` --
set(TC_BINARY $<TARGET_FILE:torchconform>)
# The Python reference and variants (python/reference/), where the bridge is built: their cells
# are registered beside the C++ ones (conformance.python.cpu.<check>, label python).
set(TC_PY_REFERENCE_SPECS "")
if(TC_PYTHON_EMBED_BUILT)
  set(TC_PY_REFERENCE_SPECS "--python;${PROJECT_SOURCE_DIR}/python/reference/reference.py;--python;${PROJECT_SOURCE_DIR}/python/reference/variants.py")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/conformance_tests.cmake.in
               ${CMAKE_BINARY_DIR}/conformance_tests.cmake.gen @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/conformance_tests.cmake
     INPUT ${CMAKE_BINARY_DIR}/conformance_tests.cmake.gen)
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${CMAKE_BINARY_DIR}/conformance_tests.cmake)

# --- recipes nobody wrote (issue 44, docs/generated.md) ------------------------------------------
# A fixed sample on every change: draws 1, 2, 9 and 10 of the generator under every check (correct
# by construction: a failing cell is a false alarm, exit 1; 9 and 10 hold the MLP, the flip on the
# training thread, accumulation), and every mutant of draws 1 to 8 (each operator at least once)
# under the check its operator must catch (one that survives is `missed`, exit 1). The larger sweep
# over fresh seeds is generated.sweep (slow; ci/nightly runs it with the night's seeds).
set(TC_GENERATED_DRAWS gen-1..2,gen-9..10)
set(TC_GENERATED_MUTANT_DRAWS gen-1..8)
foreach(check step_hygiene resume_equality eval_mode checkpoint_safety reproducibility)
  add_test(NAME generated.cpu.${check}
           COMMAND $<TARGET_FILE:torchconform> run --device cpu --check ${check}
                   --recipe ${TC_GENERATED_DRAWS},${TC_GENERATED_MUTANT_DRAWS}-@${check}
                   --json ${TC_TEST_OUT}/generated.cpu.${check}.json
                   --html ${TC_TEST_OUT}/generated.cpu.${check}.html)
  set_tests_properties(generated.cpu.${check} PROPERTIES LABELS "conformance;generated" TIMEOUT 1800 SKIP_RETURN_CODE 77)
endforeach()
# The checks no operator aims at yet, on the correct draws; the timed ones (data_saturation, amp) alone.
add_test(NAME generated.cpu.other_checks
         COMMAND $<TARGET_FILE:torchconform> run --device cpu
                 --check sanity,registration,device_agnostic,shapes,init,autograd_inplace,grad_checkpointing,distributed,torch_compile,fsdp
                 --recipe ${TC_GENERATED_DRAWS} --json ${TC_TEST_OUT}/generated.cpu.other.json
                 --html ${TC_TEST_OUT}/generated.cpu.other.html)
set_tests_properties(generated.cpu.other_checks PROPERTIES LABELS "conformance;generated" TIMEOUT 1800 SKIP_RETURN_CODE 77)
add_test(NAME generated.cpu.timed_checks
         COMMAND $<TARGET_FILE:torchconform> run --device cpu --check data_saturation,amp --quick
                 --recipe gen-1..2,gen-2-skip_set_epoch --json ${TC_TEST_OUT}/generated.cpu.timed.json
                 --html ${TC_TEST_OUT}/generated.cpu.timed.html)
set_tests_properties(generated.cpu.timed_checks PROPERTIES LABELS "conformance;generated" TIMEOUT 1800 SKIP_RETURN_CODE 77
                     RUN_SERIAL TRUE)
if(TC_TEST_PYTHON)
  add_test(NAME generated.sweep
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/generated-sweep --binary $<TARGET_FILE:torchconform>
                   --first 1000 --draws 20 --out ${TC_TEST_OUT}/generated-sweep)
  set_tests_properties(generated.sweep PROPERTIES LABELS "generated;slow" TIMEOUT 7200 RUN_SERIAL TRUE)
endif()

# --- a user's own recipe: install, build examples/user_recipe against the package, run it -------
get_filename_component(TC_TORCH_CMAKE_PREFIX "${Torch_DIR}" DIRECTORY)  # .../share/cmake
# The LibTorch prefix query of the build (and the README's) prints the prefix and nothing else.
if(TC_PYTHON)
  add_test(NAME torch.prefix_query_is_quiet COMMAND ${TC_PYTHON} -c "${TC_TORCH_PREFIX_QUERY}")
  set_tests_properties(torch.prefix_query_is_quiet PROPERTIES LABELS unit
                       PASS_REGULAR_EXPRESSION "/torch/share/cmake" FAIL_REGULAR_EXPRESSION "[Ww]arn|Error")
endif()
add_test(NAME example.user_recipe
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK=${TC_TEST_OUT}/user_recipe -DGENERATOR=${CMAKE_GENERATOR}
                 -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 -DTORCH_PREFIX=${TC_TORCH_CMAKE_PREFIX} -DLAUNCHER=${CCACHE_PROGRAM}
                 -DSTOCK_BINARY=$<TARGET_FILE:torchconform> -DPYTHON=${TC_PYTHON}
                 -P ${PROJECT_SOURCE_DIR}/cmake/example_test.cmake)
# The user projects compile through ccache with paths under this clone made relative (as the build's
# own launcher does), so a clone in another folder hits what this one compiled.
set(TC_USER_PROJECT_CCACHE_ENV "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR};CCACHE_NOHASHDIR=true")
set_tests_properties(example.user_recipe PROPERTIES LABELS example TIMEOUT 1500 ENVIRONMENT "${TC_USER_PROJECT_CCACHE_ENV}")
# The two previous releases' user projects (examples/compat/user_recipe-0.3 and -0.4, frozen)
# against this build, from one install.
add_test(NAME compat.user_recipes
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK=${TC_TEST_OUT}/compat -DGENERATOR=${CMAKE_GENERATOR}
                 -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                 -DTORCH_PREFIX=${TC_TORCH_CMAKE_PREFIX} -DLAUNCHER=${CCACHE_PROGRAM}
                 -P ${PROJECT_SOURCE_DIR}/cmake/compat_test.cmake)
set_tests_properties(compat.user_recipes PROPERTIES LABELS example TIMEOUT 1800 ENVIRONMENT "${TC_USER_PROJECT_CCACHE_ENV}")
# The wheel as a Python team gets it (pyproject.toml; python/tests/test_wheel.py): built by pip
# (scikit-build-core) in build-wheel/ from the objects ccache holds, installed into a fresh venv of
# the pinned torch and pytest, the example run and the pytest plugin used from there.
if(TC_PYTHON_BRIDGE_BUILT)
  add_test(NAME python.wheel
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_wheel.py ${PROJECT_SOURCE_DIR} ${CMAKE_BINARY_DIR}
                   ${TC_TEST_OUT}/wheel)
  set_tests_properties(python.wheel PROPERTIES LABELS "python;example" TIMEOUT 1800)
endif()
# A team's Python training script (examples/python_recipe, its own directory) through the installed
# binary's `run --python`: the installed torchconform package imported, the cells ok, language python.
# Three checks, about a minute: reproducibility (a fresh process too), resume_equality, eval_mode.
if(TC_PYTHON_EMBED_BUILT)
  add_test(NAME example.python_recipe
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DWORK=${TC_TEST_OUT}/python_recipe -DCHECKS=reproducibility,resume_equality,eval_mode
                   -P ${PROJECT_SOURCE_DIR}/cmake/python_example_test.cmake)
  set_tests_properties(example.python_recipe PROPERTIES LABELS example TIMEOUT 600)
  # Hostile Python recipes (exit 0, SIGKILL, abort, a hang, a changed process, NaN, zero steps, a
  # frozen loss, wrong types, UTF-8, the run itself killed): the judge survives them (issue 45).
  add_test(NAME python.hostile_recipes
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_hostile.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.hostile_recipes PROPERTIES LABELS resilience TIMEOUT 900)
  # Correct Python recipes written apart from the reference (a tabular regression without accuracy
  # or augmentation, a language model on dict batches of token ids): every check that applies
  # passes them, none assumes the batch's layout (issue 39).
  add_test(NAME python.written_apart
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_written_apart.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.written_apart PROPERTIES LABELS "unit;python" TIMEOUT 1500)
  # data_saturation's real-step path for Python recipes (what it runs on CUDA) on the CPU: the loader
  # timed against the recipe's own step, which trains; the copy timing too where CUDA is.
  add_test(NAME python.loader_real_step COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_loader_real_step.py)
  set_tests_properties(python.loader_real_step PROPERTIES LABELS "unit;python" TIMEOUT 120)
  # Gradient accumulation in a Python loop: correct (uneven micro-batches weighed) and undivided.
  add_test(NAME python.accumulation
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_accumulation.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.accumulation PROPERTIES LABELS "unit;python" TIMEOUT 900)
  # Generated Python recipes (python/reference/generated.py, issue 44): a seed names the C++ draw's
  # choices, pygen_N and pygen_N__OPERATOR load, one draw passes and a mutant per check is caught
  # (83 s measured); python.generated_full: two draws under five checks and every operator once (slow).
  add_test(NAME python.generated
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_generated.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.generated PROPERTIES LABELS "unit;python;generated" TIMEOUT 600)
  add_test(NAME python.generated_full
           COMMAND ${CMAKE_COMMAND} -E env TC_GENERATED_FULL=1
                   ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_generated.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.generated_full PROPERTIES LABELS "python;generated;slow" TIMEOUT 1800)
  # The Python reference's distributed and fsdp cells across two torchrun agents (--nnodes 2, c10d
  # rendezvous on 127.0.0.1), as on two machines (docs/distributed.md); every promise held.
  add_test(NAME python.two_nodes
           COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/test_two_nodes.py $<TARGET_FILE:torchconform>)
  set_tests_properties(python.two_nodes PROPERTIES LABELS "python;multi" TIMEOUT 600 PROCESSORS 2)
  # The distributed check on a DDP recipe written apart from the reference (fsdp_mlp_run.py trained
  # replicated: torch's DistributedSampler, DDP, get_state_dict): ok, every promise held or, where
  # the recipe gives no batch indices or last batch, recorded as not judged, never broken.
  add_test(NAME python.distributed_written_apart
           COMMAND ${CMAKE_COMMAND} -E env TC_CELL_JSON=${TC_TEST_OUT}/ddp-mlp.json
                   sh -c "\"$1\" run --device cpu --python \"$2\" --check distributed --recipe fsdp_mlp_run --json \"$TC_CELL_JSON\" --html '' && \"$3\" \"$4\" \"$TC_CELL_JSON\" held,recorded" sh
                   $<TARGET_FILE:torchconform> ${PROJECT_SOURCE_DIR}/python/tests/fsdp_mlp_run.py:FsdpMlpRun
                   ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/cell_promises.py)
  set_tests_properties(python.distributed_written_apart PROPERTIES LABELS "unit;python;multi" TIMEOUT 300 PROCESSORS 2)
  # fsdp on a correct Python recipe without bare_model(): the bare load is recorded, never broken.
  add_test(NAME python.fsdp_without_bare_model
           COMMAND ${CMAKE_COMMAND} -E env TC_CELL_JSON=${TC_TEST_OUT}/fsdp-no-bare.json
                   sh -c "\"$1\" run --device cpu --python \"$2\" --check fsdp --recipe no_bare_model_run --json \"$TC_CELL_JSON\" --html '' && \"$3\" \"$4\" \"$TC_CELL_JSON\" held,recorded" sh
                   $<TARGET_FILE:torchconform> ${PROJECT_SOURCE_DIR}/python/tests/no_bare_model_run.py:NoBareModelRun
                   ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/python/tests/cell_promises.py)
  set_tests_properties(python.fsdp_without_bare_model PROPERTIES LABELS "unit;python;multi" TIMEOUT 300 PROCESSORS 2)
endif()

# --- resilience: corrupt and hostile inputs, writes that cannot complete (label resilience) -------
# One executable per layer, each with its corruption corpus (2,000 files, each read in a forked
# child) and its fuzzers' regressions; the helpers they share in harness/tests/resilience_support.h.
# Both link the command line and every suite: `run --json` is tested in-process.
function(tc_resilience_test target source)
  add_executable(${target} ${source})
  target_link_libraries(${target} PRIVATE tc_cli tc_test_paths ${TC_SUITE_TARGETS} tc_reference tc_check_support GTest::gtest_main)
  tc_use_torch_pch(${target})
  tc_torch_link_fixups(${target})
  tc_gtest_suites(${target} LABELS resilience)
endfunction()
# The report readers: corrupt and deeply nested reports, the report fuzzer's regressions.
tc_resilience_test(tc_report_resilience_tests harness/tests/report_resilience_test.cpp)
# The checkpoint loader: corrupt and hostile checkpoints (made by
# reference/tests/make_hostile_checkpoints.py, standard-library Python), writes of a checkpoint and
# a report that cannot complete (file-size limit, read-only directory), the fuzz seeds ci/fuzz
# starts from, the checkpoint fuzzers' regressions.
tc_resilience_test(tc_checkpoint_resilience_tests reference/tests/checkpoint_resilience_test.cpp)

# --- the layers: the include rule of docs/design.md, and that the rule catches a forbidden include ----
add_test(NAME layers.include_rule COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/check-layers ${PROJECT_SOURCE_DIR})
# docs/api.md lists exactly the headers `cmake --install` installs (the public API).
add_test(NAME contract.public_api_documented COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/check-public-api ${PROJECT_SOURCE_DIR})
set_tests_properties(contract.public_api_documented PROPERTIES LABELS unit)
add_test(NAME layers.rule_catches_forbidden_includes COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/check-layers --self-test)
set_tests_properties(layers.include_rule layers.rule_catches_forbidden_includes PROPERTIES LABELS unit)
# No function over 80 lines and no file over 600 outside tests (universal-ctags' count, ci/code-shape).
add_test(NAME code.shape_limits COMMAND ${TC_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/ci/code-shape --check)
set_tests_properties(code.shape_limits PROPERTIES LABELS unit SKIP_RETURN_CODE 77)

# --- the scripts beside the binary (ci/nightly, the GPU bundle) and the ab / qualify JSON schemas --
include(${CMAKE_CURRENT_LIST_DIR}/ScriptTests.cmake)
