# accel_add_training_program(<name> SOURCES <files...> [LINK <targets...>]
#                            [ENTRY <symbol>] [OUTPUT_DIRECTORY <dir>])
#
# Builds <name>.so, a training program accelrun loads in each worker (see accel/main.hpp):
# a module linked with Accel::runtime (and so LibTorch), hidden visibility, --no-undefined
# (a missing library fails the build, not every rank at load), and a version script that
# exports the entry symbol alone: ENTRY, default accel_main (ACCEL_MAIN defines it; pass
# the name you give main_training_function otherwise). Through find_package(Accel
# COMPONENTS runtime) in your project, or in this tree.
function(accel_add_training_program name)
  cmake_parse_arguments(ARG "" "ENTRY;OUTPUT_DIRECTORY" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "accel_add_training_program(${name}): give SOURCES")
  endif()
  if(NOT ARG_ENTRY)
    set(ARG_ENTRY accel_main)
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  if(TARGET Accel::runtime)
    target_link_libraries(${name} PRIVATE Accel::runtime ${ARG_LINK})
  else()
    message(FATAL_ERROR "accel_add_training_program(${name}): Accel::runtime is missing; "
                        "use find_package(Accel REQUIRED COMPONENTS runtime)")
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(NOT APPLE)
    set(version_script "${CMAKE_CURRENT_BINARY_DIR}/${name}.map")
    file(WRITE "${version_script}" "{ global: ${ARG_ENTRY}; local: *; };\n")
    target_link_options(${name} PRIVATE -Wl,--no-undefined "-Wl,--version-script=${version_script}")
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS "${version_script}")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
endfunction()
