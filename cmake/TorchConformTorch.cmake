# Finds LibTorch and prepares what every torch-using target shares.
#
# Order: a LibTorch the user names (CMAKE_PREFIX_PATH or Torch_DIR), else the pinned PyPI torch in
# the repo's Python environment (TC_PYTHON, set by ci/ scripts; falls back to python3 on PATH).

# torch.utils.cmake_prefix_path read without importing torch: quick, and no warning (an import
# warns "Failed to initialize NumPy" where NumPy is absent). examples/user_recipe/README.md gives
# the same line.
# (A newline between the statements: a ';' would split a CMake argument.)
set(TC_TORCH_PREFIX_QUERY
    "import importlib.util as u, os\nprint(os.path.join(os.path.dirname(u.find_spec('torch').origin), 'share', 'cmake'), end='')")

find_package(Torch CONFIG QUIET)
if(NOT Torch_FOUND)
  if(NOT TC_PYTHON)
    find_program(TC_PYTHON NAMES python3 python)
  endif()
  if(TC_PYTHON)
    execute_process(
      COMMAND ${TC_PYTHON} -c "${TC_TORCH_PREFIX_QUERY}"
      OUTPUT_VARIABLE _tc_torch_prefix RESULT_VARIABLE _tc_rc ERROR_QUIET)
    if(_tc_rc EQUAL 0 AND _tc_torch_prefix)
      list(APPEND CMAKE_PREFIX_PATH "${_tc_torch_prefix}")
    endif()
  endif()
  find_package(Torch CONFIG)
endif()
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "LibTorch not found. Run ci/test (it installs the pinned torch into a venv), or pass "
    "-DCMAKE_PREFIX_PATH=<libtorch, or the output of: python3 -c \"import importlib.util as u, os; "
    "print(os.path.join(os.path.dirname(u.find_spec('torch').origin), 'share', 'cmake'))\">.")
endif()
message(STATUS "torchconform: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# LibTorch's CPU half only, for every target that links `torch`: its CUDA half (libtorch_cuda.so and the
# CUDA libraries it needs) took 0.18 of the 0.45 s of CPU of each start of a program on a machine
# without a GPU, and 16 of the 25 s of a start under valgrind. What needs CUDA's own API is in
# libtorchconform_cuda.so (harness/cuda/), which links it and is loaded at start where a CUDA driver
# is (harness/contract/cuda_support.h). TC_TORCH_CUDA: this LibTorch has a CUDA half.
set(TC_TORCH_CUDA FALSE)
if(TARGET torch_cuda_library AND TARGET torch_cpu_library AND EXISTS "${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu.so")
  set(TC_TORCH_CUDA TRUE)
  # `torch` is libtorch.so itself, a stub whose own DT_NEEDED names libtorch_cuda.so: it stands for
  # libtorch_cpu.so here.
  set_target_properties(torch PROPERTIES IMPORTED_LOCATION "${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu.so"
                                         IMPORTED_LOCATION_RELEASE "${TORCH_INSTALL_PREFIX}/lib/libtorch_cpu.so")
  set_property(TARGET torch PROPERTY INTERFACE_LINK_LIBRARIES torch_cpu_library)
endif()

# -Wl,-rpath-link for the CUDA libraries of a pip wheel (see the helper; installed for users too).
include(${CMAKE_CURRENT_LIST_DIR}/torchconformWheelLink.cmake)
tc_wheel_link_options(TC_TORCH_LINK_OPTIONS "${TORCH_INSTALL_PREFIX}")

function(tc_torch_link_fixups target)
  if(TC_TORCH_LINK_OPTIONS)
    target_link_options(${target} PRIVATE ${TC_TORCH_LINK_OPTIONS})
  endif()
endfunction()

# Precompiled <torch/torch.h>: compiled once (~1 min on 2 cores), reused by every torch TU.
add_library(tc_torch_pch STATIC cmake/pch_anchor.cpp)
target_link_libraries(tc_torch_pch PUBLIC torch)
target_compile_options(tc_torch_pch PUBLIC ${TORCH_CXX_FLAGS})
target_precompile_headers(tc_torch_pch PRIVATE <torch/torch.h>)
# Its compile never sees the .gch it replaces (cmake/fresh_pch.sh): the header's ccache key is then
# the same in every build directory, old or new.
# (Unquoted: without a launcher of the build's, no empty argument follows the script.)
set(tc_pch_launcher ${CMAKE_CURRENT_LIST_DIR}/fresh_pch.sh ${CMAKE_CXX_COMPILER_LAUNCHER})
set_target_properties(tc_torch_pch PROPERTIES CXX_COMPILER_LAUNCHER "${tc_pch_launcher}")

# Every TU that includes torch reuses that PCH.
function(tc_use_torch_pch target)
  target_link_libraries(${target} PUBLIC torch)
  target_precompile_headers(${target} REUSE_FROM tc_torch_pch)
endfunction()
