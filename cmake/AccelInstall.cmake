# Installs the SDK: backend.h and the public headers, the CMake package (find_package(Accel)
# gives Accel::abi, Accel::core, Accel::runtime with COMPONENTS runtime, accel_add_plugin()
# and accel_add_training_program()), pkg-config files, the libraries, the CLI, the plugins.
# One export file per target, so each component's dependencies are needed only by it.
include(CMakePackageConfigHelpers)

set(ACCEL_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/Accel")

install(DIRECTORY core/include/accel DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS accel_abi EXPORT AccelAbiTargets)
install(TARGETS accel_core EXPORT AccelCoreTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(TARGETS accel_runtime EXPORT AccelRuntimeTargets
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
foreach(part Abi Core Runtime)
  install(EXPORT Accel${part}Targets NAMESPACE Accel:: DESTINATION "${ACCEL_CMAKE_INSTALL_DIR}")
endforeach()

# pkg-config, for builds without CMake: accel (backend.h; a plugin needs no library) and
# accel-runtime (training programs; add LibTorch's flags, which Debian ships no .pc for).
# The prefix is found from the .pc file's own place (pkgconf's ${pcfiledir}): relocatable.
file(RELATIVE_PATH ACCEL_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
foreach(pc accel accel-runtime)
  configure_file("cmake/${pc}.pc.in" "${PROJECT_BINARY_DIR}/${pc}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/${pc}.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endforeach()

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
  cmake/AccelProgram.cmake
  DESTINATION "${ACCEL_CMAKE_INSTALL_DIR}")
