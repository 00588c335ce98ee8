# FindMLU: Cambricon's Neuware SDK, the runtime CNRT (cnrt.h, libcnrt.so) and CNCL
# (cncl.h, libcncl.so).
#
# Looks in NEUWARE_HOME (variable or environment), then /usr/local/neuware, the SDK's
# default install path; headers in include/, libraries in lib64/ (as Neuware installs
# them) or lib/.
#
# Defines MLU_FOUND, MLU_VERSION (CNRT's, from CNRT_MAJOR/MINOR/PATCH_VERSION in cnrt.h),
# MLU_CNCL_VERSION, MLU_INCLUDE_DIR, MLU_LIBRARY_DIR and the imported targets MLU::cnrt
# and MLU::cncl (shared libraries, loaded at run time).
set(_mlu_hints ${NEUWARE_HOME} $ENV{NEUWARE_HOME} /usr/local/neuware)

find_path(MLU_INCLUDE_DIR cnrt.h HINTS ${_mlu_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(MLU_CNCL_INCLUDE_DIR cncl.h HINTS ${_mlu_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(MLU_CNRT_LIBRARY NAMES cnrt HINTS ${_mlu_hints} PATH_SUFFIXES lib64 lib
             NO_DEFAULT_PATH)
find_library(MLU_CNCL_LIBRARY NAMES cncl HINTS ${_mlu_hints} PATH_SUFFIXES lib64 lib
             NO_DEFAULT_PATH)

# "<major>.<minor>.<patch>" from the PREFIX_MAJOR/MINOR/PATCH_VERSION macros of header.
function(_mlu_header_version header prefix out)
  if(NOT EXISTS "${header}")
    return()
  endif()
  file(STRINGS "${header}" _lines REGEX "^#define ${prefix}_(MAJOR|MINOR|PATCH)_VERSION +[0-9]+")
  set(_parts "")
  foreach(part MAJOR MINOR PATCH)
    set(_value "")
    foreach(line IN LISTS _lines)
      if(line MATCHES "^#define ${prefix}_${part}_VERSION +([0-9]+)")
        set(_value "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(_value STREQUAL "")
      return()
    endif()
    list(APPEND _parts "${_value}")
  endforeach()
  list(JOIN _parts "." _version)
  set(${out} "${_version}" PARENT_SCOPE)
endfunction()

if(MLU_INCLUDE_DIR)
  _mlu_header_version("${MLU_INCLUDE_DIR}/cnrt.h" CNRT MLU_VERSION)
endif()

# The plugin's abort and watchdog need cnclAbortComm and cnclGetCommAsyncError.
if(MLU_CNCL_INCLUDE_DIR AND EXISTS "${MLU_CNCL_INCLUDE_DIR}/cncl.h")
  _mlu_header_version("${MLU_CNCL_INCLUDE_DIR}/cncl.h" CNCL MLU_CNCL_VERSION)
  foreach(call cnclAbortComm cnclGetCommAsyncError)
    file(STRINGS "${MLU_CNCL_INCLUDE_DIR}/cncl.h" _cncl_call_lines REGEX "${call}")
    if(NOT _cncl_call_lines)
      message(STATUS "MLU: ${MLU_CNCL_INCLUDE_DIR}/cncl.h has no ${call}; the plugin needs a "
                     "CNCL that can abort a communicator and report its asynchronous errors")
      set(MLU_CNCL_INCLUDE_DIR "MLU_CNCL_INCLUDE_DIR-NOTFOUND")
      break()
    endif()
  endforeach()
endif()

include(FindPackageHandleStandardArgs)
list(JOIN _mlu_hints ", " _mlu_searched)
find_package_handle_standard_args(MLU
  REQUIRED_VARS MLU_CNRT_LIBRARY MLU_INCLUDE_DIR MLU_CNCL_LIBRARY MLU_CNCL_INCLUDE_DIR
  VERSION_VAR MLU_VERSION
  REASON_FAILURE_MESSAGE "set NEUWARE_HOME to the Neuware SDK (searched: ${_mlu_searched})")

if(MLU_FOUND)
  get_filename_component(MLU_LIBRARY_DIR "${MLU_CNRT_LIBRARY}" DIRECTORY)
  # SYSTEM: the SDK's headers are not our code and must not add warnings to it.
  if(NOT TARGET MLU::cnrt)
    add_library(MLU::cnrt UNKNOWN IMPORTED)
    set_target_properties(MLU::cnrt PROPERTIES
      IMPORTED_LOCATION "${MLU_CNRT_LIBRARY}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${MLU_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${MLU_INCLUDE_DIR}")
  endif()
  if(NOT TARGET MLU::cncl)
    add_library(MLU::cncl UNKNOWN IMPORTED)
    set_target_properties(MLU::cncl PROPERTIES
      IMPORTED_LOCATION "${MLU_CNCL_LIBRARY}"
      INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${MLU_CNCL_INCLUDE_DIR}"
      INTERFACE_INCLUDE_DIRECTORIES "${MLU_CNCL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES MLU::cnrt)
  endif()
endif()
mark_as_advanced(MLU_INCLUDE_DIR MLU_CNCL_INCLUDE_DIR MLU_CNRT_LIBRARY MLU_CNCL_LIBRARY)
