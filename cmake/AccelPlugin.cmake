# accel_add_plugin(<name> SOURCES <files...> [LINK <targets...>] [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds libbackend_<name>.so as the ABI requires: a module with hidden visibility
# that exports only accel_backend_get_api, linked with --no-undefined so a missing
# dependency fails the build rather than the user's run. Works in this tree and,
# through find_package(Accel), in a vendor's out-of-tree build.
function(accel_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LINK" ${ARGN})
  set(target backend_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET Accel::abi)
    target_link_libraries(${target} PRIVATE Accel::abi)
  else()
    target_link_libraries(${target} PRIVATE accel_abi)
  endif()
  target_link_libraries(${target} PRIVATE ${ARG_LINK})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(NOT APPLE)
    # The version script exports the entry symbol alone: without it, weak and
    # STB_GNU_UNIQUE template symbols leak out, and a unique symbol keeps dlclose
    # from ever unloading the plugin.
    set(version_script "${CMAKE_CURRENT_BINARY_DIR}/${target}.map")
    file(WRITE "${version_script}" "{ global: accel_backend_get_api; local: *; };\n")
    target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL
      "-Wl,--version-script=${version_script}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${version_script}")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED ACCEL_BUILD_PLUGIN_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ACCEL_BUILD_PLUGIN_DIR}")
  endif()
  if(COMMAND accel_enable_warnings)
    accel_enable_warnings(${target})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED ACCEL_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${ACCEL_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
