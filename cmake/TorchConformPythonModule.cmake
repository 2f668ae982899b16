# torchconform._native: the command line (every check, the Python bridge) as a CPython extension
# module, hosted by the team's interpreter (python/module/native.cpp, python/torchconform/__main__.py).
# In the build tree it lands in build/python-module/ beside nothing else; the wheel (pyproject.toml,
# scikit-build-core) installs it, with the `torchconform` package, as component python_module:
#   torchconform/_native<EXT_SUFFIX>    RUNPATH $ORIGIN/../torch/lib (the pinned torch wheel's
#                                      LibTorch and libtorch_python) and $ORIGIN/lib
#   torchconform/lib/                  the shared libraries it needs that are neither torch's, nor its
#                                      CUDA libraries', nor the system's C and C++ runtime (glibc,
#                                      libstdc++, libgcc_s; torch's own libraries need the same):
#                                      Debian's libbenchmark and libcrypto, found by
#                                      file(GET_RUNTIME_DEPENDENCIES) at install time.
# It links no libpython: the interpreter that imports it provides those symbols.
add_library(tc_python_module MODULE python/module/native.cpp python/bridge/register.cpp)
target_link_libraries(tc_python_module PRIVATE tc_cli ${TC_SUITE_TARGETS} tc_reference tc_harness tc_python_bridge)
target_compile_options(tc_python_module PRIVATE ${TORCH_CXX_FLAGS})
# The CUDA runtime it links (libcudart) is the torch wheel's own, in site-packages/nvidia/*/lib, as
# libtorch_cuda finds it (its RPATH: $ORIGIN/../../nvidia/<name>/lib).
file(GLOB _tc_nvidia_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
set(_tc_module_rpath "$ORIGIN/../torch/lib" "$ORIGIN/lib")
foreach(_d IN LISTS _tc_nvidia_dirs)
  get_filename_component(_n "${_d}/.." ABSOLUTE)
  get_filename_component(_n "${_n}" NAME)
  list(APPEND _tc_module_rpath "$ORIGIN/../nvidia/${_n}/lib")
endforeach()
set_target_properties(tc_python_module PROPERTIES
  PREFIX "" OUTPUT_NAME _native SUFFIX "${TC_PYTHON_EXT_SUFFIX}"
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python-module
  INSTALL_RPATH "${_tc_module_rpath}")
tc_torch_link_fixups(tc_python_module)

install(TARGETS tc_python_module LIBRARY DESTINATION torchconform COMPONENT python_module)
if(TARGET torchconform_cuda)  # beside it: LibTorch's CUDA half where a driver is (harness/contract/cuda_support.h)
  add_dependencies(tc_python_module torchconform_cuda)
  install(TARGETS torchconform_cuda LIBRARY DESTINATION torchconform COMPONENT python_module)
endif()
install(DIRECTORY python/torchconform DESTINATION . COMPONENT python_module
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

install(CODE "
  file(GET_RUNTIME_DEPENDENCIES
    LIBRARIES \"$<TARGET_FILE:tc_python_module>\"
    RESOLVED_DEPENDENCIES_VAR _tc_deps
    UNRESOLVED_DEPENDENCIES_VAR _tc_unresolved
    DIRECTORIES \"${TORCH_INSTALL_PREFIX}/lib\"
    PRE_EXCLUDE_REGEXES \"^ld-linux\" \"^libc[.]so\" \"^libm[.]so\" \"^libdl[.]so\" \"^libpthread[.]so\" \"^librt[.]so\" \"^libutil[.]so\"
                        \"^libstdc[+][+][.]so\" \"^libgcc_s[.]so\" \"^libpython\"
    POST_EXCLUDE_REGEXES \"/torch/lib/\" \"/nvidia/\" \"/cuda[^/]*/\")
  foreach(_d IN LISTS _tc_deps)  # the file itself, under the name the module asks for (its soname)
    file(REAL_PATH \"\${_d}\" _real)
    get_filename_component(_name \"\${_d}\" NAME)
    file(MAKE_DIRECTORY \"\${CMAKE_INSTALL_PREFIX}/torchconform/lib\")
    file(COPY_FILE \"\${_real}\" \"\${CMAKE_INSTALL_PREFIX}/torchconform/lib/\${_name}\")
    message(STATUS \"Bundled: torchconform/lib/\${_name} (\${_real})\")
  endforeach()
  foreach(_u IN LISTS _tc_unresolved)
    if(NOT _u MATCHES \"^lib(torch|c10|cuda|cudart|nccl|cupti|cublas|cudnn|nvrtc|nvToolsExt|gomp|shm)\")
      message(FATAL_ERROR \"torchconform._native needs \${_u}, found nowhere\")
    endif()
  endforeach()
" COMPONENT python_module)
