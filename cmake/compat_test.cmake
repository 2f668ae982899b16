# The previous release's user project builds against this one (CTest `compat.user_recipe_0_3`):
# install this build into a fresh prefix, configure examples/compat/user_recipe-0.3 (frozen: written
# against 0.3, `find_package(torchconform 0.3)`) against it, build it, and require
#   - the configure to accept the 0.3 request (torchconformConfigVersion.cmake),
#   - each deprecated name it uses to compile with a deprecation message saying what happens to it,
#   - the binary to list the project's recipes and run a check on one.
# A project written for a release older than the previous one is refused at configure time.
#
# cmake -DBUILD_DIR= -DSOURCE_DIR= -DWORK= -DGENERATOR= -DMAKE_PROGRAM= -DCXX_COMPILER=
#       -DTORCH_PREFIX= -DLAUNCHER= -P compat_test.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/script_step.cmake)

set(prefix ${WORK}/prefix)
set(project_dir ${SOURCE_DIR}/examples/compat/user_recipe-0.3)
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

# 2. The 0.3 project configures and builds.
step("configure the 0.3 project" ${cfg} -S ${project_dir} -B ${WORK}/build)
step("build the 0.3 project" ${CMAKE_COMMAND} --build ${WORK}/build --clean-first)
set(build_log "${step_out}${step_err}")

# 3. Every renamed name it uses compiled with a message naming the new one.
foreach(expect "seed_record.*deprecated.*removed in torchconform 0\\.5")
  if(NOT build_log MATCHES "${expect}")
    message(FATAL_ERROR "the build did not warn /${expect}/:\n${build_log}")
  endif()
endforeach()
message(STATUS "deprecation messages: ok")

# 4. It runs: its recipes are listed, and a check judges one.
set(exe ${WORK}/build/team_checks)
step("list" ${exe} list --json)
foreach(r team_mlp team_cnn team_seed_logged)
  if(NOT step_out MATCHES "\"${r}\"")
    message(FATAL_ERROR "the 0.3 project's binary does not list ${r}:\n${step_out}")
  endif()
endforeach()
step("run" ${exe} run --device cpu --recipe team_seed_logged --check registration --json ${WORK}/run.json)
file(READ ${WORK}/run.json report)
string(JSON verdict GET "${report}" cells 0 verdict)
if(NOT verdict STREQUAL "ok")
  message(FATAL_ERROR "registration on team_seed_logged: ${verdict}\n${report}")
endif()
message(STATUS "the 0.3 project runs: ok")
