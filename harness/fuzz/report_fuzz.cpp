// libFuzzer target: the report readers (see report_fuzz_body.h). Built by TC_FUZZ=ON with clang;
// run by ci/fuzz.
#include "harness/fuzz/report_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tc::fuzz::report_one(data, size);
  return 0;
}
