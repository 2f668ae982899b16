# `cmake --install build --prefix P`: the recipe API headers, the libraries and the CMake package
# torchconform (find_package(torchconform) -> torchconform::suite), so a team can check its own
# training code from its own project (examples/user_recipe).
#
# Layout under P:
#   include/torchconform/harness/{contract,util}/*.h, harness/cli.h, reference/*.h   the public headers
#   lib/libtc_*.a                                   harness, cli, main, reference, check support, suites
#   lib/cmake/torchconform/                         torchconformConfig.cmake (+ version, targets)
#   bin/torchconform                                the stock binary
#   share/torchconform/python/torchconform/         the Python recipe API (`import torchconform`), where
#                                                   the bridge is built: the installed binary finds it
#                                                   at ../share/torchconform/python from its own directory
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TC_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/torchconform)
set(TC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/torchconform)

# Every registration (checks, broken variants, the reference recipe) in one static library. Its
# consumers link it whole-archive (torchconformConfig.cmake), so no registration is dropped.
set(_tc_suite_objects "")
foreach(_t IN LISTS TC_SUITE_TARGETS)
  list(APPEND _tc_suite_objects $<TARGET_OBJECTS:${_t}>)
endforeach()
add_library(tc_suites STATIC ${_tc_suite_objects})
set_target_properties(tc_suites PROPERTIES LINKER_LANGUAGE CXX)
target_link_libraries(tc_suites PUBLIC tc_reference tc_check_support tc_reference_distributed)

# What a recipe author includes: the contract (harness/contract/: the recipe API, registration,
# the probe interfaces, benchmark registration) and the utilities it uses (harness/util/),
# tc::cli_main for an own main(), and the reference recipe with its parts so a recipe can derive
# from it. The core's internals (runner, writers, ...) and check support stay out.
install(FILES harness/cli.h DESTINATION ${TC_INSTALL_INCLUDEDIR}/harness)
install(DIRECTORY harness/contract/ DESTINATION ${TC_INSTALL_INCLUDEDIR}/harness/contract FILES_MATCHING PATTERN "*.h")
install(DIRECTORY harness/util/ DESTINATION ${TC_INSTALL_INCLUDEDIR}/harness/util FILES_MATCHING PATTERN "*.h")
install(FILES
  reference/amp_step.h
  reference/autocast.h
  reference/bounded_parse.h
  reference/checkpoint.h
  reference/data.h
  reference/derived_model.h
  reference/grad_scaler.h
  reference/distributed.h
  reference/distributed_run.h
  reference/loader_probe.h
  reference/loader_tools.h
  reference/model.h
  reference/optimizer_state.h
  reference/recompute.h
  reference/reference_run.h
  reference/schedule.h
  reference/seed.h
  DESTINATION ${TC_INSTALL_INCLUDEDIR}/reference)

set_target_properties(tc_util PROPERTIES EXPORT_NAME util)
set_target_properties(tc_contract PROPERTIES EXPORT_NAME contract)
set_target_properties(tc_report PROPERTIES EXPORT_NAME report)
set_target_properties(tc_harness PROPERTIES EXPORT_NAME harness)
set_target_properties(tc_ab PROPERTIES EXPORT_NAME ab)
set_target_properties(tc_qualify PROPERTIES EXPORT_NAME qualify)
set_target_properties(tc_cli PROPERTIES EXPORT_NAME cli)
set_target_properties(tc_main PROPERTIES EXPORT_NAME main)
set_target_properties(tc_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(tc_check_support PROPERTIES EXPORT_NAME check_support)
set_target_properties(tc_suites PROPERTIES EXPORT_NAME suites)
set_target_properties(tc_reference_distributed PROPERTIES EXPORT_NAME reference_distributed)
install(TARGETS tc_util tc_contract tc_report tc_harness tc_ab tc_qualify tc_cli tc_main tc_reference tc_check_support tc_suites tc_reference_distributed
  EXPORT torchconformTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${TC_INSTALL_INCLUDEDIR})
install(EXPORT torchconformTargets NAMESPACE torchconform:: DESTINATION ${TC_INSTALL_CMAKEDIR})

# The stock binary, finding LibTorch where it was linked from.
set_target_properties(torchconform PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS torchconform torchconform-rank RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET torchconform_cuda)  # beside it (harness/contract/cuda_support.h)
  install(TARGETS torchconform_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The Python recipe API beside it (`run --python FILE.py:Class`, docs/python.md): the pure-Python
# package `torchconform` a recipe imports. The binary (python/bridge/interpreter.cpp) looks for it
# at TC_PYTHON_PACKAGE_RELATIVE_DIR from its own directory first, then in the source tree's python/
# (TC_PYTHON_PACKAGE_DIR), which is what a binary in the build tree finds.
if(TC_PYTHON_EMBED_BUILT)
  set(TC_INSTALL_PYTHONDIR ${CMAKE_INSTALL_DATADIR}/torchconform/python)
  install(DIRECTORY python/torchconform DESTINATION ${TC_INSTALL_PYTHONDIR}
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  file(RELATIVE_PATH _tc_python_rel /p/${CMAKE_INSTALL_BINDIR} /p/${TC_INSTALL_PYTHONDIR})
  # On build_paths.cpp alone (python/bridge/build_paths.h): no other object changes with the layout.
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/python/bridge/build_paths.cpp TARGET_DIRECTORY tc_python_bridge APPEND PROPERTY
               COMPILE_DEFINITIONS TC_PYTHON_PACKAGE_RELATIVE_DIR="${_tc_python_rel}")
endif()

set(TC_BUILT_TORCH_VERSION ${Torch_VERSION})
configure_package_config_file(cmake/torchconformConfig.cmake.in
  ${CMAKE_BINARY_DIR}/torchconformConfig.cmake
  INSTALL_DESTINATION ${TC_INSTALL_CMAKEDIR})
# Compatible with projects written for this minor release and the two before it (deprecated
# aliases keep the older releases' names: CHANGELOG.md); 0.5 serves 0.3 and 0.4 projects.
math(EXPR TC_OLDEST_MINOR "${PROJECT_VERSION_MINOR} - 2")
if(TC_OLDEST_MINOR LESS 0)
  set(TC_OLDEST_MINOR 0)
endif()
configure_file(cmake/torchconformConfigVersion.cmake.in ${CMAKE_BINARY_DIR}/torchconformConfigVersion.cmake @ONLY)
install(FILES
  ${CMAKE_BINARY_DIR}/torchconformConfig.cmake
  ${CMAKE_BINARY_DIR}/torchconformConfigVersion.cmake
  cmake/torchconformWheelLink.cmake
  DESTINATION ${TC_INSTALL_CMAKEDIR})
