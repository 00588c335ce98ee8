# FindNCCL: NVIDIA's collective library, next to the CUDA toolkit or on its own.
#
# Looks in NCCL_ROOT (variable or environment), the toolkit's include and library
# directories (run find_package(CUDAToolkit) first), and /usr/local/cuda-*/lib, where
# some toolkit packages put libnccl.so.2 without a lib64 link.
#
# Defines NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY and the imported
# target NCCL::nccl (the shared library: libnccl.so.2 is loaded at run time).
file(GLOB _nccl_versioned_dirs LIST_DIRECTORIES true "/usr/local/cuda-*")
set(_nccl_include_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS})
set(_nccl_library_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR})
foreach(dir IN LISTS _nccl_versioned_dirs)
  list(APPEND _nccl_include_hints "${dir}")
  list(APPEND _nccl_library_hints "${dir}")
endforeach()

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_include_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_library_hints}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*NCCL_${part} +([0-9]+).*" "\\1" _nccl_${part}
           "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  # SYSTEM: nccl.h is not our code and must not add warnings to it.
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
