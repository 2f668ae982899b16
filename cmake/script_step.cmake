# step(<what> <command...>): runs the command; a non-zero exit is a FATAL_ERROR naming it with its
# output. Sets step_out and step_err (stdout, stderr) in the caller. For the -P test scripts
# (example_test.cmake, compat_test.cmake).
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${ARGN}\n--- stdout\n${out}\n--- stderr\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_out "${out}" PARENT_SCOPE)
  set(step_err "${err}" PARENT_SCOPE)
endfunction()

# configure_against(<out-var> <prefix>): the command that configures a user project against the
# installed package at <prefix> and the LibTorch at TORCH_PREFIX, with the caller's GENERATOR,
# CXX_COMPILER, MAKE_PROGRAM and LAUNCHER; the caller appends -S and -B. The prefixes go in the
# environment's CMAKE_PREFIX_PATH (':'-separated), which find_package reads like the cache
# variable, because a ';' inside one argument does not survive a CMake list.
function(configure_against out prefix)
  set(cmd ${CMAKE_COMMAND} -E env "CMAKE_PREFIX_PATH=${prefix}:${TORCH_PREFIX}" ${CMAKE_COMMAND} -G ${GENERATOR}
          -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  if(MAKE_PROGRAM)
    list(APPEND cmd -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
  if(LAUNCHER)
    list(APPEND cmd -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
  endif()
  set(${out} ${cmd} PARENT_SCOPE)
endfunction()

# user_project(<name> <source-dir> <out-src> <out-build>): a copy of a user project at WORK/<name>/src,
# to be built in WORK/<name>/build against the prefix WORK/prefix. Every user project of the test
# scripts lies so (the example and the two compat releases): their identical sources (team_cnn.cpp,
# team_recipe.cpp) then compile with the same relative paths (CCACHE_BASEDIR) and the same installed
# headers, and ccache serves the second compile of each from the first (a fresh machine compiled
# them three times, about 20 s each).
function(user_project name source out_src out_build)
  set(src ${WORK}/${name}/src)
  file(REMOVE_RECURSE ${WORK}/${name})
  file(COPY ${source}/ DESTINATION ${src})
  set(${out_src} ${src} PARENT_SCOPE)
  set(${out_build} ${WORK}/${name}/build PARENT_SCOPE)
endfunction()
