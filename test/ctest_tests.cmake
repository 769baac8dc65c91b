# ctest includes this when it starts (CMakeLists.txt: TEST_INCLUDE_FILES, through a generated
# file that sets pdnn_tests_exe and pdnn_tests_dir). It lists pdnn_tests' tests
# (--gtest_list_tests) and adds one ctest test per gtest suite, named by the suite, that runs the
# suite's tests in one process, and one ctest test per gtest test, named Suite.Test, for the
# tests test/ctest_properties.cmake names (the long ones and those that spin at two threads), so
# that ctest -j2 still balances them and --timeout applies to each alone. A process of
# pdnn_tests costs about 1 s of CPU before its first test (the loader, cuBLAS's and OpenCV's
# libraries; under ASan its start and exit): one per gtest test was 460 of them in each of CI's
# three suite runs (results/ci-time.md).
#
# Outcome of a group: passed when every test in it passed or skipped (some of each: passed);
# skipped only when gtest reports every one of its tests skipped ("[  SKIPPED ] N tests" with N
# the group's size, which leaves no room for a failure); failed when one failed, and
# --output-on-failure then shows gtest's "[  FAILED  ] Suite.Test" lines. One test alone:
# `build/bin/pdnn_tests --gtest_filter=Suite.Test`; a suite or a long test: `ctest -R NAME`.
#
# Listing costs a process, so the list is kept (pdnn_tests_ctest.cmake) until the binary or
# these files are newer, as GoogleTest's PRE_TEST discovery does; ctest, not the build, runs
# the binary, so a build for another CPU never needs to (docs/DESIGN.md).
include("${CMAKE_CURRENT_LIST_DIR}/ctest_properties.cmake")
set(_out "${pdnn_tests_dir}/pdnn_tests_ctest.cmake")
if(NOT EXISTS "${pdnn_tests_exe}")
  add_test(pdnn_tests_NOT_BUILT pdnn_tests_NOT_BUILT)
  return()
endif()
if(NOT EXISTS "${_out}" OR NOT "${_out}" IS_NEWER_THAN "${pdnn_tests_exe}"
   OR NOT "${_out}" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_FILE}"
   OR NOT "${_out}" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_DIR}/ctest_properties.cmake")
  execute_process(COMMAND "${pdnn_tests_exe}" --gtest_list_tests
                  WORKING_DIRECTORY "${pdnn_tests_dir}" TIMEOUT 60
                  OUTPUT_VARIABLE _listing ERROR_VARIABLE _listing RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${pdnn_tests_exe} --gtest_list_tests failed (${_rc}):\n${_listing}")
  endif()
  # gtest's listing: "Suite." (or "Prefix/Suite/0.  # TypeParam = ...") and under it its tests
  # indented ("  Test/1  # GetParam() = ..."); a ';' would split a CMake list.
  string(REPLACE ";" "," _listing "${_listing}")
  string(REPLACE "\n" ";" _lines "${_listing}")
  set(_suites "")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE " *#.*" "" _line "${_line}")
    if(_line MATCHES "^([^ ].*)\\.$")
      set(_suite "${CMAKE_MATCH_1}")
      list(APPEND _suites "${_suite}")
      set("_in_${_suite}" "")
    elseif(_line MATCHES "^ +([^ ]+)$" AND DEFINED _suite)
      set(_t "${CMAKE_MATCH_1}")
      if(NOT _t MATCHES "^DISABLED_" AND NOT _suite MATCHES "^DISABLED_")
        list(APPEND "_in_${_suite}" "${_suite}.${_t}")
      endif()
    endif()
  endforeach()
  set(_text "")
  set(_names "")
  foreach(_suite IN LISTS _suites)
    set(_group "")
    foreach(_t IN LISTS "_in_${_suite}")
      set(_own FALSE)
      foreach(_re IN LISTS pdnn_own_process_tests pdnn_spinning_tests)
        if(_t MATCHES "${_re}")
          set(_own TRUE)
        endif()
      endforeach()
      if(_own)
        string(APPEND _text "pdnn_gtest([==[${_t}]==] [==[${_t}]==] 1)\n")
        list(APPEND _names "${_t}")
      else()
        list(APPEND _group "${_t}")
      endif()
    endforeach()
    list(LENGTH _group _n)
    if(_n EQUAL 1)
      string(APPEND _text "pdnn_gtest([==[${_group}]==] [==[${_group}]==] 1)\n")
      list(APPEND _names "${_group}")
    elseif(_n GREATER 1)
      list(JOIN _group ":" _filter)
      string(APPEND _text "pdnn_gtest([==[${_suite}]==] [==[${_filter}]==] ${_n})\n")
      list(APPEND _names "${_suite}")
    endif()
  endforeach()
  string(APPEND _text "set(pdnn_tests_TESTS [==[${_names}]==])\n")
  file(WRITE "${_out}.tmp" "${_text}")
  file(RENAME "${_out}.tmp" "${_out}")
endif()

# NAME runs the tests FILTER names (one, or a ':'-separated list) in one process; COUNT of them.
macro(pdnn_gtest name filter count)
  add_test("${name}" "${pdnn_tests_exe}" "--gtest_filter=${filter}")
  if(${count} EQUAL 1)
    set(_skip "\\[  SKIPPED \\] 1 test, listed below")
  else()
    set(_skip "\\[  SKIPPED \\] ${count} tests, listed below")
  endif()
  set_tests_properties("${name}" PROPERTIES WORKING_DIRECTORY "${pdnn_tests_dir}"
                       SKIP_REGULAR_EXPRESSION "${_skip}")
endmacro()
include("${_out}")

foreach(_t IN LISTS pdnn_tests_TESTS)
  foreach(_re IN LISTS pdnn_spinning_tests)
    if(_t MATCHES "${_re}")
      set_tests_properties("${_t}" PROPERTIES PROCESSORS 2)
    endif()
  endforeach()
endforeach()
