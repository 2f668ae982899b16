# The user-recipe example end to end, as a team would use torchconform (CTest `example.user_recipe`):
# install this build into a fresh prefix, configure and build examples/user_recipe against it as its
# own CMake project, run every check on its recipe and require a cell for every registered check.
#
# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER=
#       -DTORCH_PREFIX= -DLAUNCHER= -DSTOCK_BINARY= -DPYTHON= -P example_test.cmake
# Any failure is a FATAL_ERROR (the test fails; nothing here skips).
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_step.cmake)

set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
user_project(team ${SOURCE_DIR}/examples/user_recipe ex_source ex_build)

# 1. Install.
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/torchconform/harness/contract/run.h include/torchconform/harness/contract/registry.h
          include/torchconform/harness/contract/record.h include/torchconform/reference/derived_model.h
          include/torchconform/reference/model.h lib/cmake/torchconform/torchconformConfig.cmake
          lib/cmake/torchconform/torchconformConfigVersion.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
foreach(f include/torchconform/harness/runner.h include/torchconform/suites/support/tensor_compare.h)
  if(EXISTS ${prefix}/${f})
    message(FATAL_ERROR "an internal header was installed: ${f}")
  endif()
endforeach()

# 2. Configure and build the example as its own project against the installed package.
configure_against(cfg ${prefix})
list(APPEND cfg -S ${ex_source} -B ${ex_build})
step("configure examples/user_recipe" ${cfg})
step("build examples/user_recipe" ${CMAKE_COMMAND} --build ${ex_build})
set(exe ${ex_build}/team_checks)

# 3. The example's binary registers what the stock binary does, plus the team's recipe.
step("stock list" ${STOCK_BINARY} list --json)
set(stock "${step_out}")
step("example list" ${exe} list --json)
set(mine "${step_out}")
function(names json kind out)
  string(JSON n LENGTH "${json}" ${kind})
  set(r "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON name GET "${json}" ${kind} ${i} name)
      list(APPEND r ${name})
    endforeach()
  endif()
  set(${out} "${r}" PARENT_SCOPE)
endfunction()
names("${stock}" checks stock_checks)
names("${mine}" checks my_checks)
names("${stock}" recipes stock_recipes)
names("${mine}" recipes my_recipes)
if(NOT "${my_checks}" STREQUAL "${stock_checks}")
  message(FATAL_ERROR "checks differ: the example has [${my_checks}], the stock binary [${stock_checks}]")
endif()
list(LENGTH stock_checks n_checks)
if(n_checks EQUAL 0)
  message(FATAL_ERROR "no checks registered")
endif()
# The installed stock binary runs from the prefix (its RPATH finds LibTorch) with the same catalogue.
step("installed torchconform list" ${prefix}/bin/torchconform list --json)
names("${step_out}" checks installed_checks)
if(NOT "${installed_checks}" STREQUAL "${stock_checks}")
  message(FATAL_ERROR "the installed torchconform has checks [${installed_checks}], the build's [${stock_checks}]")
endif()
set(expected_recipes ${stock_recipes} team_mlp team_cnn)
list(SORT expected_recipes)
list(SORT my_recipes)
if(NOT "${my_recipes}" STREQUAL "${expected_recipes}")
  message(FATAL_ERROR "recipes differ: the example has [${my_recipes}], expected [${expected_recipes}]")
endif()

# The installed package carries the benchmarks (registered in suites/, like every registration).
step("stock bench list" ${STOCK_BINARY} bench --benchmark_list_tests=true)
# Less the Python bridge's benchmarks (python/...): the bridge is linked into the stock binary only,
# not into torchconform::suite, so a team's own binary has neither `run --python` nor them.
string(REGEX REPLACE "python/[^\n]*\n*" "" stock_bench "${step_out}")
step("example bench list" ${exe} bench --benchmark_list_tests=true)
if(NOT "${step_out}" STREQUAL "${stock_bench}")
  message(FATAL_ERROR "benchmarks differ: the example lists\n${step_out}\nthe stock binary\n${stock_bench}")
endif()
if(NOT stock_bench MATCHES "reference/train_step")
  message(FATAL_ERROR "the stock binary lists no reference/train_step benchmark:\n${stock_bench}")
endif()

# 4. Every check on the team's recipe: exit 0 (every cell ok or skipped) and one cell per check,
#    or a not_applicable entry where the check judges Python recipes only (->Languages).
set(report ${WORK}/team_mlp.json)
step("team_checks run --recipe team_mlp" ${exe} run --recipe team_mlp --device cpu --json ${report}
     --html ${WORK}/team_mlp.html)
message("${step_out}")
file(READ ${report} rj)
string(JSON n_cells LENGTH "${rj}" cells)
string(JSON n_not_applicable LENGTH "${rj}" not_applicable)
math(EXPR n_accounted "${n_cells} + ${n_not_applicable}")
if(NOT n_accounted EQUAL n_checks)
  message(FATAL_ERROR "${n_cells} cells and ${n_not_applicable} not applicable for ${n_checks} checks")
endif()
set(seen "")
math(EXPR last "${n_cells} - 1")
foreach(i RANGE ${last})
  string(JSON recipe GET "${rj}" cells ${i} recipe)
  string(JSON check GET "${rj}" cells ${i} check)
  string(JSON verdict GET "${rj}" cells ${i} verdict)
  string(JSON evidence GET "${rj}" cells ${i} evidence)
  if(NOT recipe STREQUAL "team_mlp")
    message(FATAL_ERROR "cell ${i} is for recipe '${recipe}'")
  endif()
  string(JSON role GET "${rj}" cells ${i} role)
  if(NOT role STREQUAL "subject")
    message(FATAL_ERROR "${check} on team_mlp: role '${role}', a user's recipe is a subject under test")
  endif()
  # Which cells are ok and which skip, with which reason: a cell that turns from ok into skipped (or
  # skips for another reason) fails here. team_mlp is a tabular MLP with no probes: the checks that
  # need an image batch or a probe skip, naming it; every other check judges it (torch_compile and
  # fsdp, which judge Python recipes only, are in the report's not_applicable list, below).
  set(want_skip "")
  if(check STREQUAL "shapes")
    set(want_skip "the recipe's input is not a 4-d image batch")
  elseif(check STREQUAL "grad_checkpointing")
    set(want_skip "the recipe does not provide forward_train\\(\\)")
  elseif(check STREQUAL "checkpoint_safety")
    set(want_skip "the recipe does not provide bare_model\\(\\)")
  elseif(check STREQUAL "data_saturation")
    set(want_skip "does not implement tc::LoaderProbe")
  elseif(check STREQUAL "amp")
    set(want_skip "does not implement tc::AmpProbe")
  endif()
  if(want_skip STREQUAL "")
    if(NOT verdict STREQUAL "ok")
      message(FATAL_ERROR "${check} on team_mlp: ${verdict}, expected ok: ${evidence}")
    endif()
  elseif(NOT verdict STREQUAL "skipped" OR NOT evidence MATCHES "${want_skip}")
    message(FATAL_ERROR "${check} on team_mlp: ${verdict}, expected skipped with '${want_skip}': ${evidence}")
  endif()
  list(APPEND seen ${check})
  message(STATUS "${check}: ${verdict}")
endforeach()
# Not cells: the checks of Python recipes only, each with its reason.
if(n_not_applicable GREATER 0)
  math(EXPR last "${n_not_applicable} - 1")
  foreach(i RANGE ${last})
    string(JSON check GET "${rj}" not_applicable ${i} check)
    string(JSON reason GET "${rj}" not_applicable ${i} reason)
    if(NOT check MATCHES "^(torch_compile|fsdp)$" OR NOT reason MATCHES "judges Python recipes only")
      message(FATAL_ERROR "not applicable on team_mlp: ${check} (${reason}); only torch_compile and fsdp may be")
    endif()
    list(APPEND seen ${check})
    message(STATUS "${check}: not applicable")
  endforeach()
endif()
foreach(c IN LISTS stock_checks)
  if(NOT c IN_LIST seen)
    message(FATAL_ERROR "no cell for check '${c}' on team_mlp")
  endif()
endforeach()
string(JSON ok GET "${rj}" summary ok)
message(STATUS "team_mlp: ${n_cells} cells, ${ok} ok")

# 5. A model derived from the reference's with its own forward (team_cnn.cpp, built against the
# installed reference/derived_model.h) keeps activation checkpointing: grad_checkpointing's memory
# promise holds on it.
set(cnn_report ${WORK}/team_cnn.json)
step("team_checks run --recipe team_cnn --check grad_checkpointing" ${exe} run --recipe team_cnn
     --check grad_checkpointing --device cpu --json ${cnn_report} --html ${WORK}/team_cnn.html)
message("${step_out}")
file(READ ${cnn_report} cj)
string(JSON verdict GET "${cj}" cells 0 verdict)
string(JSON role GET "${cj}" cells 0 role)
string(JSON evidence GET "${cj}" cells 0 evidence)
if(NOT verdict STREQUAL "ok" OR NOT role STREQUAL "subject")
  message(FATAL_ERROR "grad_checkpointing on team_cnn: ${verdict} (role ${role}): ${evidence}")
endif()
message(STATUS "grad_checkpointing on team_cnn: ${evidence}")

# data_saturation's workers x prefetch sweep is measured for a user's recipe only when asked
# (--sweep); the cell's other promises are judged either way (their verdict is not asserted here:
# they measure time, and this test runs beside others). --quick: what is asserted is the sweep's
# presence, not its figures, and --quick measures each of its points over 16 steps, not 24.
foreach(sweep_flag "" "--sweep")
  set(sat_report ${WORK}/team_cnn_saturation${sweep_flag}.json)
  step("team_checks run --recipe team_cnn --check data_saturation ${sweep_flag}" ${exe} run --recipe team_cnn
       --check data_saturation --device cpu --quick ${sweep_flag} --json ${sat_report} --html ${WORK}/team_cnn_saturation${sweep_flag}.html)
  file(READ ${sat_report} sj)
  string(JSON duration GET "${sj}" cells 0 duration_s)
  string(JSON verdict GET "${sj}" cells 0 verdict)
  string(JSON has_sweep ERROR_VARIABLE no_sweep GET "${sj}" cells 0 metrics sweep)
  if(verdict STREQUAL "skipped" OR verdict STREQUAL "error")
    string(JSON evidence GET "${sj}" cells 0 evidence)
    message(FATAL_ERROR "data_saturation on team_cnn ${sweep_flag}: ${verdict}: ${evidence}")
  endif()
  if(sweep_flag STREQUAL "" AND no_sweep STREQUAL "NOTFOUND")
    message(FATAL_ERROR "data_saturation on team_cnn measured the sweep without --sweep")
  elseif(sweep_flag STREQUAL "--sweep" AND NOT no_sweep STREQUAL "NOTFOUND")
    message(FATAL_ERROR "data_saturation on team_cnn --sweep has no sweep: ${no_sweep}")
  endif()
  message(STATUS "data_saturation on team_cnn ${sweep_flag}: ${verdict} in ${duration} s")
endforeach()

# 6. The same report format: valid against the committed schema.
if(PYTHON)
  step("report schema" ${PYTHON} ${SOURCE_DIR}/harness/tests/validate_report.py
       ${SOURCE_DIR}/reports/schema/torchconform.report-1.schema.json ${report})
endif()
