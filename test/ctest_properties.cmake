# ctest includes this after the tests GoogleTest discovery lists (CMakeLists.txt), with their
# names in pdnn_tests_TESTS.
#
# Tests that spend long at 2 or more threads whose threads spin, or spin then yield
# (core/barrier.h's SpinYieldBarrier, the Hebbian kernels that wait on it), run with no other
# test beside them (PROCESSORS 2 = both of CI's cores under ctest -j2): a partner thread
# descheduled by the test next door turns each barrier into a wait for the next time slice.
# SpinYieldBarrier.EveryWriteIsSeenAfterTheBarrier: 1.2 s alone, 54 s beside two busy loops;
# the Hebbian grid the same way (results/ci-time.md). The short two-thread Hebbian tests (about
# a second, most of it the process start) are left to share. What the tests check is
# unchanged; only what runs beside them is.
set(pdnn_spinning_tests
    "^SpinYieldBarrier\\."
    "^HebbianApp\\.GridWritesOneRowPerPointAndNamesTheOverflowStep$")
foreach(t IN LISTS pdnn_tests_TESTS)
  foreach(re IN LISTS pdnn_spinning_tests)
    if(t MATCHES "${re}")
      set_tests_properties("${t}" PROPERTIES PROCESSORS 2)
    endif()
  endforeach()
endforeach()
