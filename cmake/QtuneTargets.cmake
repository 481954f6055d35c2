# Compile settings shared by every qtune target. Third-party code is never built with these flags.

# Shadowed locals: GCC spells it -Wshadow=local; clang (14 included) does not know that spelling, which with
# -Werror fails every compile, and has -Wshadow-uncaptured-local for the same job.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-Wshadow=local QTUNE_HAS_WSHADOW_LOCAL)
check_cxx_compiler_flag(-Wshadow-uncaptured-local QTUNE_HAS_WSHADOW_UNCAPTURED_LOCAL)
set(QTUNE_SHADOW_FLAG "")
if(QTUNE_HAS_WSHADOW_LOCAL)
  set(QTUNE_SHADOW_FLAG -Wshadow=local)
elseif(QTUNE_HAS_WSHADOW_UNCAPTURED_LOCAL)
  set(QTUNE_SHADOW_FLAG -Wshadow-uncaptured-local)
endif()
set(QTUNE_WARNING_FLAGS -Wall -Wextra -Wpedantic ${QTUNE_SHADOW_FLAG} -Wnon-virtual-dtor -Wimplicit-fallthrough)
if(QTUNE_WERROR)
  list(APPEND QTUNE_WARNING_FLAGS -Werror)
endif()

# Fuzz build: coverage instrumentation for all of qtune's code, so every parser's target is guided; the
# fuzz executables add the libFuzzer runtime themselves (tests/fuzz).
if(QTUNE_FUZZ AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(QTUNE_SANITIZE)
  # -fno-sanitize-recover makes UBSan findings fail the test instead of printing and carrying on.
  # -O1 -g1, after the build type's -O2 -g so they win: ASan's usual level, and line tables are all its
  # reports need; the sanitized build then compiles in about 60% of the time.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(QTUNE_SANITIZE=1)
  # GCC 12's -Wmaybe-uninitialized misfires under ASan inside libstdc++ (<regex>'s std::function states); the
  # plain build, which keeps the warning, is the one that judges our code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND QTUNE_WARNING_FLAGS -Wno-maybe-uninitialized)
  endif()
endif()

# qtune_defaults(target): warnings (as errors), include root, version macro.
function(qtune_defaults target)
  target_compile_options(${target} PRIVATE ${QTUNE_WARNING_FLAGS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${target} PRIVATE QTUNE_VERSION="${PROJECT_VERSION}")
endfunction()

# qtune_library(name SOURCES ... [DEPS ...]): a static library of ours.
function(qtune_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  qtune_defaults(${name})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# qtune_executable(name SOURCES ... [DEPS ...]): a command-line tool, placed in <build>/bin.
function(qtune_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  qtune_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# Test code itself is compiled at -O1 with line tables only, after the build type's flags so these win: the
# work tests repeat runs in the libraries, which keep the build type's flags, and this cuts the compile time
# CI spends on the test files by about 40% while a failure still names its line.
set(QTUNE_TEST_COMPILE_FLAGS -O1 -g1)

# qtune_test(name LABELS l1 [l2 ...] SOURCES ... [DEPS ...] [TIMEOUT s])
# One Catch2 executable; every TEST_CASE becomes its own CTest test carrying the labels, so
# `ctest -L formats` or `ctest -LE slow` select by area and cost. A test name must not contain ';' (CMake's
# list separator splits it into tests that select nothing, which --warn NoTests then fails).
function(qtune_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  qtune_defaults(${name})
  target_compile_options(${name} PRIVATE ${QTUNE_TEST_COMPILE_FLAGS})
  # Tests find the source and build trees as the tools do (common/paths.h: QTUNE_HOME, QTUNE_BUILD), so their
  # binaries also run from a relocated bundle (scripts/gpu/bundle.sh).
  target_link_libraries(${name} PRIVATE qtune_catch_main ${ARG_DEPS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  catch_discover_tests(${name}
    TEST_PREFIX "${name}: "
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    # A test name Catch cannot select (e.g. one containing '[') must fail, not pass having run nothing.
    EXTRA_ARGS --warn NoTests
    PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  # Labels are applied by a CTest include that runs after the discovery include: passed through
  # catch_discover_tests' PROPERTIES, a list of labels is split and all but the first are lost.
  # The skip expression is the line tests/catch_main.cpp prints for QTUNE_SKIP (tests/skip.h), so CTest
  # counts such a test as skipped, not passed. A regular expression rather than SKIP_RETURN_CODE: Catch
  # returns the number of failed assertions, and only the listener knows whether a skip was clean.
  set(label_script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  file(WRITE ${label_script}
    "if(${name}_TESTS)\n"
    "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\"\n"
    "    SKIP_REGULAR_EXPRESSION \"(^|\\n)QTUNE-SKIPPED: \")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${label_script})
  # The sanitized CI pass builds only the targets its tests need.
  if("sanitize" IN_LIST ARG_LABELS)
    add_dependencies(sanitize_tests ${name})
  endif()
endfunction()

# qtune_add_subdirectories([EXCEPT name ...]): add every immediate sub-folder that has a CMakeLists.txt, in name
# order, so a new component is one folder and needs no edit of its parent. EXCEPT leaves folders for the caller
# to add itself (in a later order).
function(qtune_add_subdirectories)
  cmake_parse_arguments(ARG "" "" "EXCEPT" ${ARGN})
  file(GLOB children LIST_DIRECTORIES true RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT children)
  foreach(child IN LISTS children)
    if(child IN_LIST ARG_EXCEPT)
      continue()
    endif()
    if(IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${child} AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${child}/CMakeLists.txt)
      add_subdirectory(${child})
    endif()
  endforeach()
endfunction()

# qtune_kernel_family(name SOURCES ... [DEPS ...] [INCLUDES_FROM folder ...]): the library of one
# kernels_src/<folder>/ family. It gets a generated header, family_source_hash.h, whose kFamilySourceHash
# covers every file in the folder, in kernels_src/common and in the kernels_src/ folders named by
# INCLUDES_FROM (whose device headers the kernels include), recomputed whenever one of them changes. The
# library is linked into the registry (kernels_src/registry) without any edit there.
function(qtune_kernel_family name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;INCLUDES_FROM" ${ARGN})
  set(globs ${CMAKE_CURRENT_SOURCE_DIR}/* ${PROJECT_SOURCE_DIR}/kernels_src/common/*)
  foreach(folder IN LISTS ARG_INCLUDES_FROM)
    list(APPEND globs ${PROJECT_SOURCE_DIR}/kernels_src/${folder}/*)
  endforeach()
  file(GLOB hashed CONFIGURE_DEPENDS LIST_DIRECTORIES false ${globs})
  set(header ${CMAKE_CURRENT_BINARY_DIR}/family_source_hash.h)
  # '|' separates the files on the command line, where ';' would end the shell command.
  string(REPLACE ";" "|" hashed_arg "${hashed}")
  add_custom_command(OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DOUT=${header} -DROOT=${PROJECT_SOURCE_DIR} "-DFILES=${hashed_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/HashSources.cmake
    DEPENDS ${hashed} ${PROJECT_SOURCE_DIR}/cmake/HashSources.cmake
    COMMENT "Hashing the sources of kernel family ${name}" VERBATIM)
  qtune_library(${name} SOURCES ${ARG_SOURCES} ${header} DEPS qt_kernel_family ${ARG_DEPS})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  set_property(GLOBAL APPEND PROPERTY QTUNE_KERNEL_FAMILY_LIBRARIES ${name})
endfunction()
