"""Where the tests find the build (set by ctest; defaults for a checkout's build/)."""
import os
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "runtime", "python"))
BUILD = os.environ.get("KERNRT_BUILD_DIR", os.path.join(REPO, "build"))
TEST_MANIFESTS = os.path.join(BUILD, "manifests", "test")
