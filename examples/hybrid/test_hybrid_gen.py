"""CPU test of kernrt.gen.hybrid (ctest hybrid.generator): the manifest's structure, fills and
sizes for the issue's description, the refusals, the weights file against the weight
buffers, and kernrt-verify on the manifest pinned to this build's cubins (verified, with no
serving-protocol misfit). KERNRT_VERIFY / KERNRT_CUBINS come from CMake."""
import json
import os
import subprocess
import tempfile
import unittest

from kernrt.gen import hybrid as h
from kernrt.gen import hybrid_weights as hw
from kernrt.gen import pin
from kernrt.gen.attention_params import GenError

ESIZE = {"bf16": 2, "f32": 4, "i32": 4}


def nbytes(m, b):
    n = ESIZE[b["dtype"]]
    for e in b["shape"]:
        n *= m["vars"][e]["max"] if isinstance(e, str) else e
    return n


class Generator(unittest.TestCase):
    d = h.Desc()
    m = h.manifest(d)

    def test_programs_and_batches(self):
        p = self.m["programs"]
        self.assertEqual(sorted(p), ["commit", "decode", "prefill", "verify"])
        self.assertEqual(p["prefill"]["batch"], {"groups": 1, "rows": "tokens"})
        self.assertEqual(p["decode"]["batch"], {"groups": 32, "rows": 1})
        self.assertEqual(p["verify"]["batch"], {"groups": 32, "rows": 8})
        self.assertNotIn("batch", p["commit"])
        for mode in ("prefill", "decode", "verify"):
            ops = [c["op"] for c in p[mode]["calls"]]
            # embed, 3 x (in_proj, conv, kda, out_proj), q/k/v proj, kv_append, attn, o_proj,
            # lm head, argmax
            self.assertEqual(len(ops), 1 + 3 * 4 + 6 + 2, mode)
            self.assertEqual(ops[0], "embed")
            self.assertEqual(ops.count(f"conv_{mode}"), 3)
            self.assertEqual(ops.count(f"kda_{mode}"), 3)
            self.assertEqual(ops.count("kv_append"), 1)
            self.assertIn("attn_decode" if mode == "decode" else "attn_prefill", ops)
            self.assertEqual(ops[-2:], ["gemm_f32_4096x2048",
                                        "argmax_last" if mode == "prefill" else "argmax_rows"])
        self.assertEqual([c["op"] for c in p["commit"]["calls"]], ["kda_commit"] * 3)
        timed = h.manifest(self.d, op_programs=("decode",))["programs"]
        self.assertEqual(sum(n.startswith("decode_c") for n in timed), 21)
        self.assertEqual(timed["decode_c5"]["calls"], [p["decode"]["calls"][5]])

    def test_fills(self):
        fills = {n: b["fill"] for n, b in self.m["buffers"].items() if "fill" in b}
        self.assertEqual(fills, {"token": "token", "slot": "slot", "seq_len": "seq_len",
                                 "cu_seqlens": "cu_seqlens", "next_token": "tokens",
                                 "verify_tokens": "tokens"})
        b = self.m["buffers"]
        self.assertEqual(b["slot"]["shape"], ["tokens"])
        self.assertEqual(b["seq_len"]["shape"], ["seqs"])
        self.assertEqual(b["cu_seqlens"]["shape"], [33])
        self.assertEqual(b["verify_tokens"]["shape"], ["seqs", 8])
        self.assertEqual(b["pages"]["domain"], {"index_into": "kv", "stride": 64})
        self.assertEqual(b["pages"]["shape"], ["seqs", 4096 // 64])

    def test_sizes(self):
        d, m = self.d, self.m
        self.assertEqual(d.kda.proj, 8208)  # q 2048 | k 2048 | v 2048 | g 2048 | beta 16
        self.assertEqual(d.conv.line_bytes, 6144 * 3 * 2)
        self.assertEqual(m["states"]["conv"]["bytes_per_seq"], 3 * 6144 * 3 * 2)
        # per KDA layer: fp32 state 16 x 128 x 128 + the verify record of 8 tokens
        rec = 8 * (16 * 128 * 4 * 2 + 16 * 4 + 16 * 128 * 2)
        self.assertEqual(m["states"]["kda"]["bytes_per_seq"], 3 * (16 * 128 * 128 * 4 + rec))
        self.assertEqual(m["states"]["kv"]["bytes_per_token"], 4 * 2 * 256 * 2)
        w = {n: nbytes(m, b) for n, b in m["buffers"].items() if b["kind"] == "weight"}
        self.assertEqual(w["l0_in_proj"], 8208 * 2048 * 2)
        self.assertEqual(w["l3_q_proj"], 6144 * 2048 * 2)
        self.assertEqual(w["l3_o_proj"], 2048 * 6144 * 2)
        self.assertEqual(w["l1_conv"], 6144 * 4 * 4)
        self.assertEqual(len(w), 2 + 3 * 5 + 4)
        gemms = {n: o["impl"]["launches"][0] for n, o in m["ops"].items() if n.startswith("gemm")}
        for name, ln in gemms.items():
            n, k = (int(x) for x in name.split("_")[-1].split("x"))
            self.assertEqual(ln["args"][4:], [{"i32": n}, {"i32": k}], name)

    def test_strides_into_fused_rows(self):
        ops = self.m["ops"]
        f = {x["at"]: x for x in ops["kda_verify"]["impl"]["launches"][0]["args"][0]["pack"]["fields"]}
        self.assertEqual((f[88]["i64"], f[96]["i64"]), (8 * 6144, 6144))    # q / k in qkv rows
        self.assertEqual((f[120]["i64"], f[128]["i64"]), (8 * 8208, 8208))  # g in proj rows
        self.assertEqual(f[168]["i64"], self.d.kda_slot)
        c = {x["at"]: x for x in ops["conv_verify"]["impl"]["launches"][0]["args"][0]["pack"]["fields"]}
        self.assertEqual(c[88]["i64"], self.d.conv_slot)  # state_stride: one pool slot
        self.assertEqual(c[64]["i64"], 8208)              # x token stride: the proj row

    def test_refusals(self):
        for kw, msg in ((dict(heads_q=32), "Q24"), (dict(page=16), "page"),
                        (dict(head_k=64), "K"), (dict(layers=("kda", "mlp")), "kda"),
                        (dict(max_seqs=200, max_tokens=1024), "verify"), (dict(steps=9), "steps")):
            with self.assertRaisesRegex(GenError, msg):
                h.Desc(**kw)
        with self.assertRaisesRegex(GenError, "attention layer"):
            h.Desc(layers=("kda",))

    def test_weights_file_matches_buffers(self):
        d = h.Desc(hidden=256, vocab=512, max_seqs=4, max_tokens=64, max_context=256,
                   layers=("kda", "attn"))
        m = h.manifest(d)
        with tempfile.TemporaryDirectory() as t:
            path = hw.write(d, os.path.join(t, "w.safetensors"))
            hdr = hw.read_header(path)
            size = os.path.getsize(path)
        want = {n: b for n, b in m["buffers"].items() if b["kind"] == "weight"}
        self.assertEqual(sorted(hdr), sorted(want))
        end = 0
        for n, b in want.items():
            lo, hi = hdr[n]["data_offsets"]
            self.assertEqual(hdr[n]["shape"], b["shape"], n)
            self.assertEqual(hi - lo, nbytes(m, b), n)
            end = max(end, hi)
        self.assertEqual((size - end - 8) % 8, 0)
        self.assertLess(size - end, 1 << 16)

    def test_scenario_schedule(self):
        import scenario
        log = scenario.dry_run(self.d)
        self.assertEqual(sum(x.startswith("decode") for x in log), 64 + 3)
        self.assertEqual(sum(x.startswith("verify") for x in log), 3)
        self.assertIn("leave seq 0", log)
        # seq 3 joins after seq 0 left and gets its slots back
        self.assertIn("prefill seqs [3] rows 5 seq_len [5] conv [1] kda [1]", log)
        # a round with 3 of 8 accepted moves seq 2 to the conv line of its 3rd token
        v = [x for x in log if x.startswith("verify")]
        self.assertIn("conv [3, 1]", v[0])
        self.assertNotIn("conv [3,", v[1])

    @unittest.skipUnless(os.environ.get("KERNRT_VERIFY") and os.environ.get("KERNRT_CUBINS"),
                         "KERNRT_VERIFY / KERNRT_CUBINS not set (run through ctest)")
    def test_kernrt_verify_fits_the_protocol(self):
        cubins = os.environ["KERNRT_CUBINS"]
        others = [h.manifest(h.Desc(layers=("attn", "kda", "attn"))),
                  h.manifest(h.Desc(layers=("attn",))),
                  h.manifest(self.d, op_programs=("decode",))]
        with tempfile.TemporaryDirectory() as t:
            paths = []
            for i, m in enumerate([self.m] + others):
                paths.append(os.path.join(t, f"hybrid{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(pin(m, cubins), f)
            r = subprocess.run([os.environ["KERNRT_VERIFY"], "--cubins", cubins] + paths,
                               capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("verified; serving protocol: 3 forwards, 6 fills"), 4,
                         r.stdout)


if __name__ == "__main__":
    unittest.main()
