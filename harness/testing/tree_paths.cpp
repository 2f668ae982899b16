#include "harness/testing/test_paths.h"

namespace tc::test_paths {

const char* source_dir() { return TC_SOURCE_DIR; }
const char* binary_dir() { return TC_BINARY_DIR; }
const char* test_python() { return TC_TEST_PYTHON; }
const char* torchconform_binary() { return TC_BINARY; }
const char* ddp_trainer() { return TC_TRAINER; }

}  // namespace tc::test_paths
