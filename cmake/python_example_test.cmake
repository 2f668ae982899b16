# The Python example end to end, as a team would use it (CTest `example.python_recipe`): install this
# build into a fresh prefix, copy examples/python_recipe/ (a training script nobody here wrote and its
# torchconform.Run wrapper) into a directory of its own, and run the installed binary on it with
# `--python`: the installed `torchconform` package must be the one imported (not the source tree's),
# and the cells of the checks asked for must be ok, each marked language python, role subject.
#
# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DCHECKS= -P python_example_test.cmake
# Any failure is a FATAL_ERROR (the test fails; nothing here skips).
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_step.cmake)

set(prefix ${WORK}/prefix)
set(team ${WORK}/team)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${team})

# 1. Install: the binary and the Python package beside it.
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(pydir ${prefix}/share/torchconform/python)
foreach(f bin/torchconform share/torchconform/python/torchconform/__init__.py
          share/torchconform/python/torchconform/run.py share/torchconform/python/torchconform/_bridge.py)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
if(EXISTS ${pydir}/torchconform/__pycache__)
  message(FATAL_ERROR "the install carries ${pydir}/torchconform/__pycache__")
endif()

# 2. The team's directory: the example's files, and a probe recording where `import torchconform`
# came from (it is imported when `list --python` loads the file).
file(COPY ${SOURCE_DIR}/examples/python_recipe/train.py ${SOURCE_DIR}/examples/python_recipe/check_train.py
     DESTINATION ${team})
file(WRITE ${team}/where.py [=[
import os
import torchconform
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "where.txt"), "w") as f:
    f.write(os.path.dirname(os.path.abspath(torchconform.__file__)))

class Where(torchconform.Run):
    """records where torchconform was imported from"""
]=])
set(exe ${prefix}/bin/torchconform)
step("installed torchconform list --python" ${exe} list --python ${team}/where.py:Where
     --python ${team}/check_train.py:TrainRun)
if(NOT step_out MATCHES "train_run")
  message(FATAL_ERROR "`list --python check_train.py:TrainRun` does not list train_run:\n${step_out}")
endif()
file(READ ${team}/where.txt imported_from)
file(REAL_PATH ${pydir}/torchconform want)
if(NOT imported_from STREQUAL want)
  message(FATAL_ERROR "the installed binary imported torchconform from ${imported_from}, not ${want}")
endif()
message(STATUS "torchconform imported from ${imported_from}")

# 3. The checks asked for on the team's script, through the installed binary.
set(report ${WORK}/train_run.json)
step("installed torchconform run --python check_train.py:TrainRun" ${exe} run --device cpu
     --python ${team}/check_train.py:TrainRun --recipe train_run --check ${CHECKS} --quick
     --json ${report} --html ${WORK}/train_run.html)
message("${step_out}")
file(READ ${report} rj)
string(JSON n_cells LENGTH "${rj}" cells)
string(REPLACE "," ";" want_checks "${CHECKS}")
list(LENGTH want_checks n_checks)
if(NOT n_cells EQUAL n_checks)
  message(FATAL_ERROR "${n_cells} cells for the ${n_checks} checks ${CHECKS}")
endif()
math(EXPR last "${n_cells} - 1")
foreach(i RANGE ${last})
  foreach(k recipe check verdict evidence role language)
    string(JSON ${k} GET "${rj}" cells ${i} ${k})
  endforeach()
  if(NOT recipe STREQUAL "train_run" OR NOT role STREQUAL "subject" OR NOT language STREQUAL "python")
    message(FATAL_ERROR "cell ${i}: recipe '${recipe}', role '${role}', language '${language}' "
                        "(want train_run, subject, python)")
  endif()
  if(NOT verdict STREQUAL "ok")
    message(FATAL_ERROR "${check} on train_run: ${verdict}, expected ok: ${evidence}")
  endif()
  message(STATUS "${check} on train_run: ${verdict}")
endforeach()
