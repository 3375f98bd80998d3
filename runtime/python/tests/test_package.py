"""The kernrt package on any machine: import without torch or a GPU, clear driver errors,
verifier problems with their JSON pointers, error classes per kind, I/O refusals, and the
device-array and binding helpers. Runs in CI (label cpu)."""
import json
import os
import sys
import tempfile
import unittest

import _env  # noqa: F401  (sys.path)
import kernrt
from kernrt import arrays


class ImportAndDriver(unittest.TestCase):
    def test_import_needs_no_torch(self):
        self.assertTrue(callable(kernrt.load))
        if "torch" not in sys.modules:
            self.assertNotIn("torch", sys.modules, "importing kernrt imported torch")

    def test_library_and_version(self):
        self.assertTrue(os.path.exists(kernrt.library_path()))
        self.assertRegex(kernrt.version(), r"^\d+\.\d+\.\d+$")

    def test_load_without_a_device_says_so(self):
        if kernrt.device_available():
            self.skipTest("a device is present")
        path = os.path.join(_env.TEST_MANIFESTS, "scratch_pair.json")
        if not os.path.exists(path):
            self.skipTest("test kernels not built")
        with self.assertRaises(kernrt.DriverError) as cm:
            kernrt.load(path)
        self.assertIn("no CUDA driver/device", cm.exception.message)


class Verifier(unittest.TestCase):
    def manifest(self):
        with open(os.path.join(_env.REPO, "examples", "decode.json")) as f:
            return json.load(f)

    def test_a_good_manifest_has_no_problems(self):
        self.assertEqual(kernrt.verify(self.manifest()), [])
        self.assertEqual(kernrt.verify(os.path.join(_env.REPO, "examples", "decode.json")), [])

    def test_problems_carry_pointers(self):
        m = self.manifest()
        m["schema_version"] = 3
        problems = kernrt.verify(m)
        self.assertTrue(problems)
        self.assertEqual(problems[0].kind, "manifest")
        self.assertEqual(problems[0].path, "/schema_version")

    def test_load_raises_the_class_of_the_first_problem(self):
        m = self.manifest()
        m["schema_version"] = 3
        with self.assertRaises(kernrt.ManifestError) as cm:
            kernrt.load(m)
        self.assertEqual(cm.exception.path, "/schema_version")
        with self.assertRaises(kernrt.ParseError) as cm:
            kernrt.load('{"schema_version": 4,')
        self.assertIn("line", cm.exception.errors[0])

    def test_files_that_are_not_manifests_are_io_errors(self):
        with self.assertRaises(kernrt.IoError):
            kernrt.load("/nonexistent/m.json")
        with tempfile.TemporaryDirectory() as d, self.assertRaises(kernrt.IoError) as cm:
            kernrt.load(d)
        self.assertIn("is a directory, expected a regular file", cm.exception.message)

    def test_ranks_reach_the_load(self):
        tray = os.path.join(_env.REPO, "..", "shared", "corpus", "kern", "tray.json")
        if not os.path.exists(tray):
            self.skipTest("the specification folder ../shared is not here")
        with self.assertRaises(kernrt.CallerError) as cm:
            kernrt.load(tray)
        self.assertEqual(cm.exception.path, "/topology/groups/ep")
        self.assertIn("has 4 ranks and this process was given no index", cm.exception.message)
        # With its ranks and a rendezvous, what is left of the tray is its unsupported externs.
        with self.assertRaises(kernrt.ManifestError) as cm:
            kernrt.load(tray, ranks={"ep": 3, "tp": 1}, rendezvous="/tmp/kernrt-unused")
        self.assertIn("unsupported extern `extern:x`", cm.exception.message)

    def test_every_class_is_a_kernrt_error(self):
        for c in (kernrt.ParseError, kernrt.ManifestError, kernrt.ArtifactError,
                  kernrt.DriverError, kernrt.CallerError, kernrt.IoError, kernrt.InternalError):
            self.assertTrue(issubclass(c, kernrt.Error))


class Streams(unittest.TestCase):
    def test_zero_is_cudas_default_stream_never_the_runtimes(self):
        from kernrt.runtime import _stream_handle

        class TorchLike:
            def __init__(self, h):
                self.cuda_stream = h
        self.assertEqual(_stream_handle(kernrt.RUNTIME_STREAM), 0)  # the C ABI's NULL
        self.assertEqual(_stream_handle(0), 1)                      # CU_STREAM_LEGACY
        self.assertEqual(_stream_handle(TorchLike(0)), 1)           # torch's default stream
        self.assertEqual(_stream_handle(TorchLike(0x1234)), 0x1234)
        self.assertEqual(_stream_handle(2), 2)                      # CU_STREAM_PER_THREAD
        with self.assertRaises(TypeError):
            _stream_handle("s")


class Arrays(unittest.TestCase):
    def test_device_array_is_bytes_through_the_interface(self):
        a = arrays.DeviceArray(0x1000, 64, owner=None, dtype="bf16", shape=(4, 8))
        cai = a.__cuda_array_interface__
        self.assertEqual(cai["shape"], (64,))
        self.assertEqual(cai["typestr"], "|u1")
        self.assertEqual(cai["data"], (0x1000, False))
        self.assertEqual(a.shape, (4, 8))

    def test_span_of_pairs_and_interfaces(self):
        self.assertEqual(arrays.span((0x2000, 128)), (0x2000, 128))

        class Strided:
            __cuda_array_interface__ = {"shape": (3, 4), "typestr": "<f4", "data": (0x3000, False),
                                        "strides": (64, 4), "version": 3}
        self.assertEqual(arrays.span(Strided()), (0x3000, 2 * 64 + 3 * 4 + 4))
        with self.assertRaises(TypeError):
            arrays.span(object())


if __name__ == "__main__":
    unittest.main()
