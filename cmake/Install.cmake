#===- Install.cmake - cmake --install and MASFormerConfig.cmake ---------===#
#
# Installs headers (sources and generated .inc), libraries, tools, and a CMake
# package so that `find_package(MASFormer)` gives MASFormer::MASFormerIR and
# MASFormer::MASFormerTransforms.
#
#===---------------------------------------------------------------------===#
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/masformer
  DESTINATION include
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/masformer
  DESTINATION include
  FILES_MATCHING PATTERN "*.inc"
  PATTERN "CMakeFiles" EXCLUDE)

set(MASFORMER_INSTALL_CMAKE_DIR lib/cmake/masformer)
install(EXPORT MASFormerTargets
  NAMESPACE MASFormer::
  DESTINATION ${MASFORMER_INSTALL_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/MASFormerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/MASFormerConfig.cmake
  INSTALL_DESTINATION ${MASFORMER_INSTALL_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/MASFormerConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/MASFormerConfig.cmake
  ${PROJECT_BINARY_DIR}/MASFormerConfigVersion.cmake
  DESTINATION ${MASFORMER_INSTALL_CMAKE_DIR})
