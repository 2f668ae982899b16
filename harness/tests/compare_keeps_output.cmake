# cmake -DTC=torchconform -DFIX=fixtures -DOUT=dir -P compare_keeps_output.cmake
# compare on bad input exits 2 and leaves a file already at --html untouched.
set(html ${OUT}/compare-kept.html)
file(WRITE ${html} "previous comparison\n")
execute_process(COMMAND ${TC} compare ${FIX}/other_schema.json ${FIX}/gbench_base.json --html ${html}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit 2, got ${rc}: ${err}")
endif()
file(READ ${html} kept)
if(NOT kept STREQUAL "previous comparison\n")
  message(FATAL_ERROR "compare on bad input changed ${html}")
endif()
# The same command on good input does replace it.
execute_process(COMMAND ${TC} compare ${FIX}/gbench_base.json ${FIX}/gbench_base.json --html ${html}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
file(READ ${html} now)
if(NOT rc EQUAL 0 OR NOT now MATCHES "<!DOCTYPE html>")
  message(FATAL_ERROR "compare on good input did not write ${html} (exit ${rc})")
endif()
message("ok: exit 2 on bad input, ${html} kept; replaced on good input")
