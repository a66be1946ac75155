/// \file
/// xdev's conformance suite of the portable operations, as a reusable device test suite: every
/// op (fill, scale, axpy, add, mul, minimum, maximum, combine, exp, copy, sum, dot, gemm, gather, rng_uniform,
/// rng_normal, convert, parallel_for), ops on windows of arrays and their transfers, its errors and its policies
/// (RngDefault, Autocast), checked against naive references computed in the test. xdev runs it on the host backend and
/// through the CPU fallback (tests/ops/ops_test.cpp); a backend author runs the same suite on their backend:
///
///     // my_backend_ops_test.cpp, linked to GTest::gtest_main and GTest::gmock
///     #include <xdev/testing/op_suite.hpp>
///     XDEV_INSTANTIATE_OP_SUITE(acme, xdev::testing::Targets<SimTarget>);   // tests acme/Ops/SIM.*
///
/// Targets may give `AnyDevice`s (`xdev::testing::AnyHostTarget`, see erased_targets.hpp): the suite
/// then runs through the erased path; `ParallelFor...` and `EachOpCountsItsFallbackExactlyOnce`
/// skip there, saying why.
///
/// Include this header in one translation unit of a test program only (it defines the tests).
/// The suite needs 2 devices for a few tests (they skip with the reason otherwise), and
/// `HostAccessibleBackend` for none. It takes about a second per target. See docs/testing.md.
#pragma once

#include <xdev/testing/op_suite/autocast.hpp>
#include <xdev/testing/op_suite/common.hpp>
#include <xdev/testing/op_suite/convert.hpp>
#include <xdev/testing/op_suite/elementwise.hpp>
#include <xdev/testing/op_suite/errors.hpp>
#include <xdev/testing/op_suite/fallback.hpp>
#include <xdev/testing/op_suite/gather.hpp>
#include <xdev/testing/op_suite/gemm.hpp>
#include <xdev/testing/op_suite/random.hpp>
#include <xdev/testing/op_suite/reduce.hpp>
#include <xdev/testing/op_suite/windows.hpp>

namespace xdev::testing::op_suite {

XDEV_REGISTER_DEVICE_TEST_SUITE_P(
    Ops, Fill, Scale, Axpy, AddAndMul, MinimumAndMaximum, CombineAndScaleTakeEveryDtype, Exp, Copy, CopyAcrossDevices,
    OpsAcceptAStream, SumOfIntegersIsExact, SumOfTenMillionTenthsIsAccurate, SumAlongEachAxis,
    SumAlongTheOnlyAxisGivesAScalarArray, SumAxisErrorsNameTheShapes, Dot, GemmAllTransposesAndScalarsF32,
    GemmAllTransposesAndScalarsF64, GemmFullMantissasWithinTheErrorBound, GemmWithAlphaZeroOrEmptyDepthOnlyScalesC,
    GemmShapeErrorsNameTheShapes, Gather, GatherIndexOutOfRangeFailsTheFutureAndLeavesOutUntouched,
    RngMatchesTheReferenceStream, RngDefaultGeneratorFollowsTheRngDefaultPolicy,
    RngDeviceStreamAdvancesAcrossCallsAndManualSeedRestartsIt, RngWithAnExplicitSeedLeavesTheDeviceStreamAlone,
    RngHalvesOnTwoDevicesConcatenateToTheWholeStream, ConvertRoundsToNearestEvenAndSaturates,
    ParallelForCoversTheRangeOnceAndReportsExceptions, ShapeMismatchNamesBothShapesAndRunsNothing,
    ArrayOnAnotherDeviceNamesBothDevicesAndRunsNothing, GemmOutputThatIsAnInputIsRejected,
    GatherOutputThatIsTheTableIsRejected, EachOpCountsItsFallbackExactlyOnce,
    AutocastRoundsMatrixInputsOnlyInsideAMatchingScope, AutocastAccumulatesInF32, OpsOnWindowsTouchOnlyTheirWindow,
    WindowsTransferAndCopyExactlyTheirElements);

}  // namespace xdev::testing::op_suite

/// Runs xdev's op conformance suite for the targets of the `xdev::testing::Targets<...>` list given
/// after `Prefix` (an identifier starting the test names: `Prefix/Ops/TARGET.Gemm`). Use it once,
/// at namespace scope, outside any namespace.
#define XDEV_INSTANTIATE_OP_SUITE(Prefix, ...)                    \
  namespace xdev::testing::op_suite {                             \
  XDEV_INSTANTIATE_DEVICE_TEST_SUITE_P(Prefix, Ops, __VA_ARGS__); \
  }                                                               \
  static_assert(true, "a semicolon after XDEV_INSTANTIATE_OP_SUITE(...)")
