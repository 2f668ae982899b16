// libFuzzer targets for the checkpoint loader (see checkpoint_fuzz_body.h). Built by TC_FUZZ=ON with
// clang, twice: TC_FUZZ_ARCHIVE undefined (the bytes are the whole file) or defined (the bytes are
// the archive, the first line made for them). Run by ci/fuzz.
#include "reference/fuzz/checkpoint_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#ifdef TC_FUZZ_ARCHIVE
  tc::fuzz::checkpoint_archive_one(data, size);
#else
  tc::fuzz::checkpoint_file_one(data, size);
#endif
  return 0;
}
