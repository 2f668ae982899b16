// What this build was configured with: absolute paths, compiled into one small translation unit
// (build_paths.cpp) so that no heavy object (interpreter.cpp, the bridge's benchmarks) carries a
// path, and a clone of the repository in another folder hits the compiler cache for them (ccache's
// CCACHE_BASEDIR rewrites paths on the command line, not inside the code). nullptr where the build
// has none (e.g. the wheel's build embeds no interpreter).
#pragma once

namespace tc::python::build_paths {

const char* package_relative_dir();     // the installed package's directory, relative to the binary's
const char* package_dir();              // the project's python/ directory (the torchconform package)
const char* site_packages();            // TC_PYTHON's site-packages
const char* python_executable();        // TC_PYTHON
const char* embed_python_executable();  // TC_EMBED_PYTHON: the interpreter whose libpython is embedded
const char* reference_file();           // python/reference/reference.py (the bridge's benchmarks)
const char* bench_stub_file();          // python/bridge/bench/bridge_bench_stub.py

}  // namespace tc::python::build_paths
