# libFuzzer targets (TC_FUZZ=ON, clang only; ci/fuzz configures a separate build dir with it):
#   tc_fuzz_report              the report readers of report / bench --json / compare / trend
#   tc_fuzz_checkpoint          the checkpoint loader, the bytes as the whole file
#   tc_fuzz_checkpoint_archive  the checkpoint loader, the bytes as the archive behind a first line
#                               made for them (hash recomputed): every input reaches LibTorch
# Our code is instrumented (coverage, AddressSanitizer, UndefinedBehaviorSanitizer); LibTorch is the
# pip wheel's, not instrumented: the fuzzer sees coverage in our code only, and ASan sees bad reads
# of LibTorch's allocations made from our code (touch_all reads every storage byte), not inside it.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TC_FUZZ=ON needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++ (ci/fuzz does it)")
endif()
set(TC_FUZZ_COMPILE -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
                    -fno-sanitize-recover=undefined)
set(TC_FUZZ_LINK -fsanitize=fuzzer,address,undefined)

# The utilities are a leaf library without LibTorch (harness/util): instrumented and linked whole.
target_compile_options(tc_util PRIVATE ${TC_FUZZ_COMPILE})

# The report readers are the core's library tc_report (no LibTorch), instrumented here, with the
# record model it reads into (contract/record.cpp, built here without the rest of tc_contract).
target_compile_options(tc_report PRIVATE ${TC_FUZZ_COMPILE})
add_executable(tc_fuzz_report harness/fuzz/report_fuzz.cpp harness/contract/record.cpp)
target_include_directories(tc_fuzz_report PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(tc_fuzz_report PRIVATE tc_report tc_util nlohmann_json::nlohmann_json)
target_compile_options(tc_fuzz_report PRIVATE ${TC_FUZZ_COMPILE})
target_link_options(tc_fuzz_report PRIVATE ${TC_FUZZ_LINK})

add_library(tc_fuzz_checkpoint_lib OBJECT reference/checkpoint.cpp reference/bounded_parse.cpp)
target_include_directories(tc_fuzz_checkpoint_lib PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(tc_fuzz_checkpoint_lib PUBLIC tc_util torch)
target_compile_options(tc_fuzz_checkpoint_lib PUBLIC ${TORCH_CXX_FLAGS} ${TC_FUZZ_COMPILE})
foreach(target tc_fuzz_checkpoint tc_fuzz_checkpoint_archive)
  add_executable(${target} reference/fuzz/checkpoint_fuzz.cpp)
  target_link_libraries(${target} PRIVATE tc_fuzz_checkpoint_lib)
  target_link_options(${target} PRIVATE ${TC_FUZZ_LINK})
  tc_torch_link_fixups(${target})
endforeach()
target_compile_definitions(tc_fuzz_checkpoint_archive PRIVATE TC_FUZZ_ARCHIVE)
