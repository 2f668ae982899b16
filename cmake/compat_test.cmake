# The two previous releases' user projects build against this one (CTest `compat.user_recipes`):
# install this build into a fresh prefix once, configure examples/compat/user_recipe-0.3 and -0.4
# (frozen: written against 0.3 and 0.4, `find_package(torchconform 0.3)` / `0.4`) against it, build
# each, and require
#   - the configure to accept the request (torchconformConfigVersion.cmake),
#   - each deprecated name it uses to compile with a deprecation message saying what happens to it,
#   - the binary to list the project's recipes and run a check on one.
# A project written for a release older than those is refused at configure time.
#
# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER=
#       -DTORCH_PREFIX= -DLAUNCHER= -P compat_test.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_step.cmake)

set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

configure_against(cfg ${prefix})

# 1. A request older than the previous release is refused at configure time, with the versions named.
file(MAKE_DIRECTORY ${WORK}/too_old)
file(WRITE ${WORK}/too_old/CMakeLists.txt
     "cmake_minimum_required(VERSION 3.25)\nproject(too_old LANGUAGES CXX)\nfind_package(torchconform 0.2 REQUIRED)\n")
execute_process(COMMAND ${cfg} -S ${WORK}/too_old -B ${WORK}/too_old/build
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "torchconform.*0\\.2")
  message(FATAL_ERROR "find_package(torchconform 0.2) was not refused with the versions named (exit ${rc}):\n${out}${err}")
endif()
message(STATUS "a 0.2 request refused: ok")

# 2. Each earlier release's project configures, builds and runs: examples/compat/user_recipe-<v>,
#    frozen as that release shipped it; its deprecated names compile with a message naming what
#    happens to them; its recipes are listed and a check judges one.
function(older_project version recipes judged expect_warnings)
  user_project(team-${version} ${SOURCE_DIR}/examples/compat/user_recipe-${version} dir build)
  step("configure the ${version} project" ${cfg} -S ${dir} -B ${build})
  step("build the ${version} project" ${CMAKE_COMMAND} --build ${build})
  set(build_log "${step_out}${step_err}")
  foreach(expect ${expect_warnings})
    if(NOT build_log MATCHES "${expect}")
      message(FATAL_ERROR "the ${version} project's build did not warn /${expect}/:\n${build_log}")
    endif()
  endforeach()
  step("list" ${build}/team_checks list --json)
  foreach(r ${recipes})
    if(NOT step_out MATCHES "\"${r}\"")
      message(FATAL_ERROR "the ${version} project's binary does not list ${r}:\n${step_out}")
    endif()
  endforeach()
  step("run" ${build}/team_checks run --device cpu --recipe ${judged} --check registration --json ${WORK}/run-${version}.json)
  file(READ ${WORK}/run-${version}.json report)
  string(JSON verdict GET "${report}" cells 0 verdict)
  if(NOT verdict STREQUAL "ok")
    message(FATAL_ERROR "registration on ${judged} (${version} project): ${verdict}\n${report}")
  endif()
  message(STATUS "the ${version} project builds and runs: ok")
endfunction()

older_project(0.3 "team_mlp;team_cnn;team_seed_logged" team_seed_logged
              "seed_record.*deprecated.*removed in torchconform 0\\.6")
older_project(0.4 "team_mlp;team_cnn" team_mlp "")
