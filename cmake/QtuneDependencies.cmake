# Every dependency comes from Debian packages (scripts/setup.sh installs them), except the CUDA toolkit,
# which is found under CUDA_HOME or /usr/local/cuda. libcuda is never linked: the driver is dlopen'ed at
# run time so every tool works on machines without a GPU.

find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SQLITE3 REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)

if(QTUNE_BUILD_TESTS)
  find_package(Catch2 2.13 REQUIRED)
  include(Catch)
endif()
if(QTUNE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

if(NOT DEFINED CUDAToolkit_ROOT)
  if(DEFINED ENV{CUDA_HOME})
    set(CUDAToolkit_ROOT "$ENV{CUDA_HOME}")
  elseif(EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
endif()
find_package(CUDAToolkit REQUIRED)
message(STATUS "qtune: CUDA toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR}")
