// The portable operations on the host backend (its own op members), on FALLBACK (a backend with no
// op members, so every op runs through the CPU fallback) and on FILLER (its own `fill` only):
// xdev's op conformance suite, <xdev/testing/op_suite.hpp>, the same one a backend author runs on
// their backend.
#include <xdev/testing/device_test.hpp>
#include <xdev/testing/op_suite.hpp>

#include "support/test_targets.hpp"

XDEV_INSTANTIATE_OP_SUITE(
    xdev, xdev::testing::Targets<xdev::testing::HostTarget, xdev_test::FallbackTarget, xdev_test::FillMemberTarget>);
