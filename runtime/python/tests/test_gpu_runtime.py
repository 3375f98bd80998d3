"""The kernrt package on a GPU with torch: zero-copy views written in place, programs on
torch's stream (eager and graph), bound calls on torch tensors, and a bound call captured
in torch.cuda.graph. Skips without a device or torch. scratch_pair computes
y[i] = 2 x[n-1-i] + x[i] exactly in f32."""
import os
import unittest

import _env  # noqa: F401  (sys.path)
import kernrt

try:
    import torch
    HAVE = torch.cuda.is_available() and kernrt.device_available()
except ImportError:
    HAVE = False

MANIFEST = os.path.join(_env.TEST_MANIFESTS, "scratch_pair.json")


def reference(x, n):
    return 2 * x[:n].flip(0) + x[:n]


@unittest.skipUnless(HAVE, "needs torch and a CUDA device")
class GpuRuntime(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(MANIFEST):
            self.skipTest("test kernels not built")
        self.rt = kernrt.load(MANIFEST)
        self.n = 4096

    def tearDown(self):
        self.rt.close()

    def test_views_are_zero_copy_and_typed(self):
        x, y = self.rt.buffer("x"), self.rt.buffer("y")
        self.assertEqual((x.dtype, tuple(x.shape)), (torch.float32, (self.n,)))
        self.assertEqual(x.data_ptr(), self.rt.buffers["x"]["ptr"])
        self.assertEqual(self.rt.state("blob").numel(), self.rt.states["blob"]["bytes"])
        x.copy_(torch.randn(self.n, device="cuda"))
        y.fill_(float("nan"))
        self.rt.enqueue("main", n=self.n)  # torch's current stream
        torch.cuda.current_stream().synchronize()
        self.assertTrue(torch.equal(y, reference(x, self.n)))

    def test_graph_replays_on_torch_stream_read_new_inputs(self):
        x, y = self.rt.buffer("x"), self.rt.buffer("y")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for seed in range(3):
                torch.manual_seed(seed)
                x.copy_(torch.randn(self.n, device="cuda"))
                self.rt.enqueue("main", graph=True, n=self.n)
                want = reference(x, self.n)
                s.synchronize()
                self.assertTrue(torch.equal(y, want), f"replay {seed}")

    def test_bound_call_on_torch_tensors(self):
        x = torch.randn(self.n, device="cuda")
        y = torch.full((self.n,), float("nan"), device="cuda")
        own = self.rt.buffer("y")
        own.fill_(-1.0)
        self.rt.enqueue("main", bind={"x": x, "y": y}, n=self.n)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y, reference(x, self.n)))
        self.assertTrue(torch.all(own == -1.0).item(), "the runtime's own y was written")
        with self.assertRaises(kernrt.CallerError) as cm:
            self.rt.enqueue("main", bind={"y": y[:100]}, n=self.n)
        self.assertIn("it takes 16384 bytes", cm.exception.message)

    def test_bound_call_captured_in_a_torch_graph(self):
        x = torch.randn(self.n, device="cuda")
        y = torch.empty(self.n, device="cuda")
        self.rt.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.rt.enqueue("main", bind={"x": x, "y": y}, n=self.n)
        for seed in (5, 6):
            torch.manual_seed(seed)
            x.copy_(torch.randn(self.n, device="cuda"))
            g.replay()
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(y, reference(x, self.n)), f"replay {seed}")

    def test_timing(self):
        t = self.rt.time("main", iters=20, graph=True, n=self.n)
        self.assertEqual(t["iters"], 20)
        self.assertGreater(t["median_us"], 0.0)


if __name__ == "__main__":
    unittest.main()
