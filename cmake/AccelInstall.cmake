# Installs the SDK a vendor builds a plugin against: backend.h, the CMake package
# (find_package(Accel) gives Accel::abi, Accel::core and accel_add_plugin()), the
# core library, the CLI and the plugins.
include(CMakePackageConfigHelpers)

set(ACCEL_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/Accel")

install(DIRECTORY core/include/accel DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS accel_abi EXPORT AccelTargets)
install(TARGETS accel_core EXPORT AccelTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(EXPORT AccelTargets NAMESPACE Accel:: DESTINATION "${ACCEL_CMAKE_INSTALL_DIR}")

configure_package_config_file(cmake/AccelConfig.cmake.in
  "${PROJECT_BINARY_DIR}/AccelConfig.cmake"
  INSTALL_DESTINATION "${ACCEL_CMAKE_INSTALL_DIR}"
  PATH_VARS ACCEL_PLUGIN_INSTALL_DIR)
# The ABI's major is the package's compatibility line: a 1.x SDK builds 1.x plugins.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/AccelConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/AccelConfig.cmake"
  "${PROJECT_BINARY_DIR}/AccelConfigVersion.cmake"
  cmake/AccelPlugin.cmake
  DESTINATION "${ACCEL_CMAKE_INSTALL_DIR}")
