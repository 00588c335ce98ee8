# FindMUSA: Moore Threads' MUSA SDK, the runtime (musa_runtime.h, libmusart.so) and MCCL
# (mccl.h, libmccl.so).
#
# Looks in MUSA_HOME (variable or environment), then MUSA_PATH (environment), then
# /usr/local/musa, the SDK's default install path.
#
# Defines MUSA_FOUND, MUSA_VERSION (from MUSART_VERSION, when the header has it),
# MUSA_INCLUDE_DIR, MUSA_LIBRARY_DIR and the imported targets MUSA::musart and
# MUSA::mccl (shared libraries, loaded at run time).
set(_musa_hints ${MUSA_HOME} $ENV{MUSA_HOME} $ENV{MUSA_PATH} /usr/local/musa)

find_path(MUSA_INCLUDE_DIR musa_runtime.h HINTS ${_musa_hints} PATH_SUFFIXES include
          NO_DEFAULT_PATH)
find_path(MUSA_MCCL_INCLUDE_DIR mccl.h HINTS ${_musa_hints} PATH_SUFFIXES include
          NO_DEFAULT_PATH)
find_library(MUSA_MUSART_LIBRARY NAMES musart HINTS ${_musa_hints} PATH_SUFFIXES lib lib64
             NO_DEFAULT_PATH)
find_library(MUSA_MCCL_LIBRARY NAMES mccl HINTS ${_musa_hints} PATH_SUFFIXES lib lib64
             NO_DEFAULT_PATH)

if(MUSA_INCLUDE_DIR)
  foreach(header musa_runtime_api.h musa_runtime.h)
    if(EXISTS "${MUSA_INCLUDE_DIR}/${header}" AND NOT _musa_version_number)
      file(STRINGS "${MUSA_INCLUDE_DIR}/${header}" _musa_version_line
           REGEX "^#define MUSART_VERSION +[0-9]+")
      string(REGEX REPLACE ".*MUSART_VERSION +([0-9]+).*" "\\1" _musa_version_number
             "${_musa_version_line}")
    endif()
  endforeach()
  if(_musa_version_number)
    # MUSART_VERSION is 10000 * major + 100 * minor + patch.
    math(EXPR _musa_major "${_musa_version_number} / 10000")
    math(EXPR _musa_minor "(${_musa_version_number} % 10000) / 100")
    set(MUSA_VERSION "${_musa_major}.${_musa_minor}")
  endif()
endif()

# The plugin's collectives need NCCL 2.14's non-blocking communicators in MCCL.
if(MUSA_MCCL_INCLUDE_DIR AND EXISTS "${MUSA_MCCL_INCLUDE_DIR}/mccl.h")
  file(STRINGS "${MUSA_MCCL_INCLUDE_DIR}/mccl.h" _mccl_config_lines REGEX "mcclCommInitRankConfig")
  if(NOT _mccl_config_lines)
    message(STATUS "MUSA: ${MUSA_MCCL_INCLUDE_DIR}/mccl.h has no mcclCommInitRankConfig; the "
                   "plugin needs an MCCL with non-blocking communicators (MCCL_HAS_CONFIG, "
                   "MCCL 2.28.9 or newer)")
    set(MUSA_MCCL_INCLUDE_DIR "MUSA_MCCL_INCLUDE_DIR-NOTFOUND")
  endif()
endif()

include(FindPackageHandleStandardArgs)
list(JOIN _musa_hints ", " _musa_searched)
find_package_handle_standard_args(MUSA
  REQUIRED_VARS MUSA_MUSART_LIBRARY MUSA_INCLUDE_DIR MUSA_MCCL_LIBRARY MUSA_MCCL_INCLUDE_DIR
  VERSION_VAR MUSA_VERSION
  REASON_FAILURE_MESSAGE "set MUSA_HOME to the MUSA SDK (searched: ${_musa_searched})")

if(MUSA_FOUND)
  get_filename_component(MUSA_LIBRARY_DIR "${MUSA_MUSART_LIBRARY}" DIRECTORY)
  # SYSTEM: the SDK's headers are not our code and must not add warnings to it.
  if(NOT TARGET MUSA::musart)
    add_library(MUSA::musart UNKNOWN IMPORTED)
    set_target_properties(MUSA::musart PROPERTIES
      IMPORTED_LOCATION "${MUSA_MUSART_LIBRARY}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${MUSA_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${MUSA_INCLUDE_DIR}")
  endif()
  if(NOT TARGET MUSA::mccl)
    add_library(MUSA::mccl UNKNOWN IMPORTED)
    set_target_properties(MUSA::mccl PROPERTIES
      IMPORTED_LOCATION "${MUSA_MCCL_LIBRARY}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${MUSA_MCCL_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${MUSA_MCCL_INCLUDE_DIR}")
  endif()
endif()
mark_as_advanced(MUSA_INCLUDE_DIR MUSA_MCCL_INCLUDE_DIR MUSA_MUSART_LIBRARY MUSA_MCCL_LIBRARY)
