#include "python/bridge/build_paths.h"

namespace tc::python::build_paths {

#ifdef TC_PYTHON_PACKAGE_RELATIVE_DIR
const char* package_relative_dir() { return TC_PYTHON_PACKAGE_RELATIVE_DIR; }
#else
const char* package_relative_dir() { return nullptr; }
#endif

#ifdef TC_PYTHON_PACKAGE_DIR
const char* package_dir() { return TC_PYTHON_PACKAGE_DIR; }
#else
const char* package_dir() { return nullptr; }
#endif

#ifdef TC_PYTHON_SITE_PACKAGES
const char* site_packages() { return TC_PYTHON_SITE_PACKAGES; }
const char* python_executable() { return TC_PYTHON_EXECUTABLE; }
#else
const char* site_packages() { return nullptr; }
const char* python_executable() { return nullptr; }
#endif

#ifdef TC_EMBED_PYTHON_EXECUTABLE
const char* embed_python_executable() { return TC_EMBED_PYTHON_EXECUTABLE; }
#else
const char* embed_python_executable() { return nullptr; }
#endif

#ifdef TC_PYTHON_REFERENCE_FILE
const char* reference_file() { return TC_PYTHON_REFERENCE_FILE; }
const char* bench_stub_file() { return TC_BRIDGE_BENCH_STUB_FILE; }
#else
const char* reference_file() { return nullptr; }
const char* bench_stub_file() { return nullptr; }
#endif

}  // namespace tc::python::build_paths
