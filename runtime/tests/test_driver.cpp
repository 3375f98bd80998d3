// Driver loading without a GPU: a missing library or device is a clear Driver error,
// never a crash, and device_available() agrees with the process-wide table.
#include <gtest/gtest.h>

#include "driver.hpp"
#include "kernrt/runtime.hpp"

namespace kernrt {
namespace {

TEST(Driver, MissingLibraryIsDriverError) {
  auto r = rt::open_driver("libkernrt-no-such-driver.so.1");
  ASSERT_FALSE(r);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].kind, ErrorKind::Driver);
  EXPECT_NE(r.errors[0].message.find("no CUDA driver/device: cannot open "
                                     "`libkernrt-no-such-driver.so.1`"),
            std::string::npos)
      << r.errors[0].message;
}

TEST(Driver, DeviceAvailableMatchesDriverTable) {
  std::string why;
  bool available = device_available(&why);
  auto api = rt::driver();
  EXPECT_EQ(available, static_cast<bool>(api));
  if (!available) {
    EXPECT_EQ(why.rfind("no CUDA driver/device: ", 0), 0u) << why;
  }
}

}  // namespace
}  // namespace kernrt
