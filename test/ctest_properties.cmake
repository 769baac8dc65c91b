# test/ctest_tests.cmake includes this before it adds the tests: which gtest tests keep a
# process (and a ctest test) of their own, and which of those run with nothing beside them.
# Every other test runs in its suite's process (ctest_tests.cmake says why).
#
# Their own process: the long ones (an app run, MPI ranks, Python, the largest shapes: 2 s of
# CPU or more under the sanitizers, results/ci-time.md), so that ctest -j2 spreads them over
# both cores and --timeout (300 s, 600 s under the sanitizers) holds for each; and the ones
# whose threads spin at two threads (the Hebbian kernels wait on SpinYieldBarrier). A suite
# of long tests is named whole.
set(pdnn_own_process_tests
    "^[A-Za-z0-9]*App\\."
    "^AppHelp\\."
    "^DistributedMpi\\."
    "^DcganDdpTwin\\."
    "^CrashConsistency\\."
    "^MemoryPlanExecution\\.(Offload|MicroBatches)"
    "^ConvK4s2\\.(ExactOnInteger|WithinTheRounding|FoldedInputActivation|FusedActivation)"
    "^Conv3x3\\.(FusedActivation|ExactOnIntegerDataAtEveryShape|WithinTheRoundingBound)"
    "^Conv2d\\.FusedActivationBackwardInChunksEqualsTheWholeBatch$"
    "^EndToEnd\\."
    "^ClassifierTask\\.PrefetchingTrainsExactlyAsTheSynchronousPath$"
    "^Dcgan\\.WholeModelGradientsMatchFiniteDifferences$"
    "^BlasCore\\.(Reexecution|AppPrints)"
    "^Plot\\."
    "^MemoryStudyTwin\\."
    "^MemoryTable\\."
    "^Caltech101Six\\.ShippedFolderLoads"
    "^ShippedCcp\\.LoadsAsTheReadmeDescribesIt$"
    "^HebbianCpu\\.(RunMatchesNaiveReferenceAtTwoThreads|ThreadCountChangesNoBit)$"
    "^ThreadsPerContext\\.HebbianKernels$")
# With nothing beside them (PROCESSORS 2 = both of CI's cores under ctest -j2): tests that spend
# long at 2 or more threads whose threads spin, or spin then yield (core/barrier.h's
# SpinYieldBarrier, the Hebbian kernels that wait on it): a partner thread descheduled by the
# test next door turns each barrier into a wait for the next time slice.
# SpinYieldBarrier.EveryWriteIsSeenAfterTheBarrier: 1.2 s alone, 54 s beside two busy loops;
# the Hebbian grid the same way (results/ci-time.md). The short two-thread Hebbian tests (about
# a second, most of it the process start) have their own process but share the cores. What the
# tests check is unchanged; only what runs beside them is.
set(pdnn_spinning_tests
    "^SpinYieldBarrier\\."
    "^HebbianApp\\.GridWritesOneRowPerPointAndNamesTheOverflowStep$")
