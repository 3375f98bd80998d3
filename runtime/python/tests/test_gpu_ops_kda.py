"""The kda kernels on a GPU through the package, against validation/kda/kda_ref.py (float64):
a varlen prefill with 1- and 17-token sequences and an initial state (chunked kernel), a
decode step on pool lines with a null line (token-step kernel), and the chunk_kda drop-in in
fla's state layout. Gate: rel rms of o against the bf16-rounded reference and of the state
against the float64 state <= 2e-3. Skips without a device, torch or the kda cubins (the full
device validation is validation/kda/run.py)."""
import os
import sys
import unittest

import _env  # noqa: F401  (sys.path)
import kernrt

sys.path.insert(0, os.path.join(_env.REPO, "validation", "kda"))
try:
    import torch
    HAVE = torch.cuda.is_available() and kernrt.device_available()
except ImportError:
    HAVE = False

GATE = 2e-3


@unittest.skipUnless(HAVE, "needs torch and a CUDA device")
class GpuKda(unittest.TestCase):
    def setUp(self):
        cub = kernrt.cubin_dir()
        if not cub or not os.path.exists(os.path.join(cub, "kda_chunk.sm90a.cubin")):
            self.skipTest("kda cubins not built")
        os.environ.setdefault("KERNRT_CUBINS", cub)
        import fixture  # noqa: F401  (validation/kda: inputs, runtimes)
        import kda_ref
        self.fx, self.ref, self.build = fixture, kda_ref, os.path.dirname(os.path.dirname(cub))

    def err(self, got, want, rounded=True):
        w = want.to(torch.bfloat16).double() if rounded else want
        return self.ref.rel_rms(got.double(), w)

    def test_varlen_prefill_with_state(self):
        c = self.fx.Case(cu=[0, 1, 18, 100], H=2, HV=4, gates="harsh", seed=3)
        ours = self.fx.Prefill(c, self.build)
        ours.write()
        o, ht = ours.run()
        o64, h64 = self.ref.recurrent(c.q, c.k, c.v, c.g, c.beta, initial_state=c.h0,
                                      cu_seqlens=c.cu, **c.ref_opts())
        self.assertLess(self.err(o, o64), GATE)
        self.assertLess(self.err(ht, h64, rounded=False), GATE)
        ours.rt.close()

    def test_decode_on_pool_lines(self):
        c = self.fx.Case(B=3, T=1, H=2, gates="init", seed=4)
        srv = self.fx.Serving(c.profile(), self.build, max_seqs=3, max_tokens=16, steps=2)
        srv.set_lines([2, 0, 1])
        srv.line_state(2).copy_(c.h0[0])
        srv.line_state(1).copy_(c.h0[2])
        srv.write_inputs("dec", c, t0=0)
        srv.rt.enqueue("decode", vars={"seqs": 3})
        torch.cuda.synchronize()
        h0 = c.h0.clone()
        h0[1].zero_()  # the null line reads zeros
        o64, h64 = self.ref.recurrent(c.q, c.k, c.v, c.g, c.beta, initial_state=h0, **c.ref_opts())
        self.assertLess(self.err(srv.rt.buffer("dec_o")[:3].unsqueeze(1), o64), GATE)
        self.assertLess(self.err(srv.line_state(2), h64[0], rounded=False), GATE)
        self.assertLess(self.err(srv.line_state(1), h64[2], rounded=False), GATE)
        srv.rt.close()

    def test_chunk_kda_dropin_fla_layout(self):
        from kernrt.ops import kda as ops
        c = self.fx.Case(B=1, T=70, H=2, gates="init", seed=5)
        o, ht = ops.chunk_kda(c.q, c.k, c.v, c.g, c.beta, initial_state=c.h0.transpose(-1, -2).contiguous(),
                              output_final_state=True, use_qk_l2norm_in_kernel=True,
                              use_gate_in_kernel=True, A_log=c.A_log, dt_bias=c.dt_bias)
        torch.cuda.synchronize()
        o64, h64 = self.ref.recurrent(c.q, c.k, c.v, c.g, c.beta, initial_state=c.h0, **c.ref_opts())
        self.assertLess(self.err(o, o64), GATE)
        self.assertLess(self.err(ht.transpose(-1, -2), h64, rounded=False), GATE)


if __name__ == "__main__":
    unittest.main()
