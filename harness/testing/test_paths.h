// Where the tests find the source tree, the build tree and the Python they run: compiled into one
// small library (target tc_test_paths, its source written by cmake/TorchConformTests.cmake into the
// build tree's generated/tree_paths.cpp) instead of a define on every
// test target, so that a test's translation units carry no absolute path and a clone of the
// repository in another folder hits the compiler cache for them (ccache's CCACHE_BASEDIR rewrites
// paths on the command line, not inside the code).
#pragma once

namespace tc::test_paths {

const char* source_dir();   // the repository's root
const char* binary_dir();   // the CMake build directory
const char* test_python();  // the Python interpreter the tests run (the configured venv's, else python3)
const char* torchconform_binary();  // the built torchconform
const char* ddp_trainer();          // the reference's DDP training as a torchrun program (fault tests)

}  // namespace tc::test_paths
