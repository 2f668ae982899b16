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
