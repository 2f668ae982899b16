// Version and commit of this build (generated at build time: cmake/write_version.cmake).
#pragma once

namespace tc::build {
extern const char* const kVersion;
extern const char* const kGitCommit;  // nullptr when the source is not a git checkout
extern const char* const kBuildType;
}  // namespace tc::build
