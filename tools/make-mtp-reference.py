#!/usr/bin/env python3
"""The glm4_moe fixture with one MTP (NextN) layer and its reference draft logits.

Usage: python3 tools/make-mtp-reference.py --corpus corpus/kjv.txt --out DIR
       (the fixture lands in DIR/glm4_moe; tests/data/glm4_moe is its output)

What it does (the MTP step as docs/formats.md, "Multi-token prediction", writes it down;
the published checkpoints' tensor names and the order [embedding ; hidden] of eh_proj's input):
  1. Builds the glm4_moe fixture with tools/make-reference.py's build_arch, with
     num_nextn_predict_layers=1 in the config, and (unless --skip-nofield) a second time without
     the field in a temporary directory, to show the trunk (weights, reference.txt, logits) is the same.
  2. Draws the MTP layer's weights (model.layers.N.*, N = num_hidden_layers) from their own
     torch.Generator (seed 5005), rounds them to bf16 and appends them to model.safetensors.
  3. Computes the MTP draft logits in float32 with a decoder layer written by hand from the notes
     (no transformers MTP code). The same hand-written layer runs the trunk too and is compared
     with transformers' logits, which validates it.
  4. Appends mtp_* lines to reference.txt (existing lines unchanged).
  5. Prints a SUMMARY line.

Every assumption about transformers is checked at run time; a failed check raises CheckFailed
with a message that says what was expected and what was found.

Needs torch, transformers 5.x, tokenizers, safetensors. Runs on the CPU.
"""

import argparse
import copy
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import traceback

ARCH = "glm4_moe"
MTP_SEED = 5005
# The init scales build_arch passes to init_params (literals inside build_arch, so repeated here).
STD = 0.15
NORM_JITTER = 0.25
BIAS_STD = 0.3
ESCB_STD = 0.05          # e_score_correction_bias: |0.05 randn|, as init_params draws it
HEAD_MULT = 3.0          # untied lm_head: std * 3
# Cross-check tolerance of the hand-written trunk against transformers, relative to the logit range.
XCHECK_REL_TOL = 1e-4
NEAR_TIE = 1e-3          # argmax margins below this are flagged


class CheckFailed(RuntimeError):
    pass


def check(cond, msg):
    if not cond:
        raise CheckFailed(msg)


def banner(s):
    print("\n=== %s ===" % s, flush=True)


# ---------------------------------------------------------------- helpers module

def load_make_reference(path):
    """Import tools/make-reference.py (the dash in its name rules out a plain import)."""
    check(os.path.isfile(path), "tools/make-reference.py not found at %s (use --make-reference)" % path)
    spec = importlib.util.spec_from_file_location("make_reference", path)
    check(spec is not None and spec.loader is not None, "cannot make an import spec for %s" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    need = ["ARCHS", "build_arch", "init_params", "round_params_bf16", "save_checkpoint", "to_published",
            "write_reference", "prompt_texts", "load_model", "last_logits", "top_margin", "fmt",
            "load_saved_tensors", "expected_keys", "read_corpus_lines", "weight_files"]
    missing = [n for n in need if not hasattr(mod, n)]
    check(not missing, "make-reference.py lacks %s: has it been refactored?" % missing)
    check(ARCH in mod.ARCHS, "make-reference.py ARCHS has no %r" % ARCH)
    spec_ = mod.ARCHS[ARCH]
    for k in ("cfg", "seed", "theta", "head_dim", "tok_kind", "tok_vocab"):
        check(k in spec_, "ARCHS[%r] lacks %r" % (ARCH, k))
    print("make-reference.py: %s; ARCHS[%r]: seed=%s theta=%s rotary width=%s gate_mult=%s num_nextn_predict_layers=%r"
          % (path, ARCH, spec_["seed"], spec_["theta"], spec_["head_dim"], spec_.get("gate_mult"),
             spec_["cfg"].get("num_nextn_predict_layers")))
    return mod


class patched_nextn:
    """Context manager: ARCHS[glm4_moe]['cfg'] with num_nextn_predict_layers=value, restored on exit."""

    def __init__(self, mod, value):
        self.mod, self.value, self.saved = mod, value, None

    def __enter__(self):
        self.saved = self.mod.ARCHS[ARCH]
        spec = copy.deepcopy(self.saved)
        spec["cfg"]["num_nextn_predict_layers"] = self.value
        self.mod.ARCHS[ARCH] = spec
        return spec

    def __exit__(self, *exc):
        self.mod.ARCHS[ARCH] = self.saved
        return False


# ---------------------------------------------------------------- reference.txt

def read_reference(path):
    """Return (text, {key: {p: [tokens...]}}, vocab) for the per-prompt model records."""
    with open(path, encoding="ascii") as f:
        text = f.read()
    recs, vocab = {}, None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "vocab":
            vocab = int(parts[1])
        elif parts[0] in ("prompt", "greedy", "logit_margin") or parts[0].startswith("mtp_"):
            recs.setdefault(parts[0], {})[int(parts[1])] = parts[2:]
    return text, recs, vocab


# ---------------------------------------------------------------- transformers checks

def precheck_param_names(mod, torch):
    """Build the model from config with and without num_nextn_predict_layers=1 (vocab arbitrary)
    and check the two have the same parameters and buffers: i.e. transformers does not grow MTP
    modules from the field, so init_params draws the same trunk. Raises if not."""
    from transformers import AutoConfig, AutoModelForCausalLM
    spec = mod.ARCHS[ARCH]
    names = {}
    for nextn in (0, 1):
        fields = dict(spec["cfg"])
        fields["num_nextn_predict_layers"] = nextn
        fields.update(vocab_size=1005, rope_parameters={"rope_type": "default", "rope_theta": spec["theta"]})
        if "partial_rotary_factor" in fields:
            fields["rope_parameters"]["partial_rotary_factor"] = fields["partial_rotary_factor"]
        err = None
        for style in ("rope_parameters", "rope_theta"):
            f2 = dict(fields)
            if style == "rope_theta":
                del f2["rope_parameters"]
                f2["rope_theta"] = spec["theta"]
            try:
                cfg = AutoConfig.for_model(ARCH, **f2)
                model = AutoModelForCausalLM.from_config(cfg)
                break
            except Exception as ex:  # same fallback as build_arch
                err = ex
                model = None
        check(model is not None, "cannot build %s from config (num_nextn_predict_layers=%d): %r" % (ARCH, nextn, err))
        got = getattr(cfg, "num_nextn_predict_layers", "<absent>")
        check(got == nextn, "config.num_nextn_predict_layers is %r after AutoConfig.for_model(..., %d)" % (got, nextn))
        names[nextn] = ({n: tuple(p.shape) for n, p in model.named_parameters()},
                        {n: tuple(b.shape) for n, b in model.named_buffers()})
        del model
    for i, what in enumerate(("parameters", "buffers")):
        a, b = names[0][i], names[1][i]
        if a != b:
            extra = sorted(set(b) - set(a))[:10]
            gone = sorted(set(a) - set(b))[:10]
            changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])[:10]
            raise CheckFailed("transformers builds different %s with num_nextn_predict_layers=1: extra %s, "
                              "missing %s, reshaped %s. The trunk would not be drawn the same; this script "
                              "assumes the field only matters to loaders." % (what, extra, gone, changed))
        # order matters too: init_params draws in named_parameters order
        check(list(a) == list(b), "%s come in a different order with num_nextn_predict_layers=1" % what)
    print("precheck: num_nextn_predict_layers=1 builds the same %d parameters and %d buffers (same order)"
          % (len(names[1][0]), len(names[1][1])))


def submodel_and_head(model):
    """The base model (model.model) and the LM head of a Glm4MoeForCausalLM, checked."""
    import torch
    base = getattr(model, "model", None)
    check(base is not None, "%s has no .model attribute (expected the Glm4MoeModel)" % type(model).__name__)
    head = getattr(model, "lm_head", None)
    if head is None and hasattr(model, "get_output_embeddings"):
        head = model.get_output_embeddings()
    check(isinstance(head, torch.nn.Linear), "lm_head is %r, expected nn.Linear" % (type(head),))
    check(head.bias is None, "lm_head has a bias; glm4_moe's has none")
    layers = getattr(base, "layers", None)
    check(layers is not None, "%s has no .layers" % type(base).__name__)
    return base, head, layers


def hf_forward(model, ids, torch):
    """transformers' logits [n, V] and post-final-norm hidden states [n, H], plus each trunk
    layer's output captured by forward hooks (for per-layer diagnostics)."""
    base, head, layers = submodel_and_head(model)
    x = torch.tensor([ids], dtype=torch.long)
    captured, hooks = {}, []

    def mk(l):
        def hook(_m, _inp, out):
            t = out[0] if isinstance(out, (tuple, list)) else out
            captured[l] = t.detach()[0].float().clone()
        return hook

    for l, layer in enumerate(layers):
        hooks.append(layer.register_forward_hook(mk(l)))
    try:
        with torch.no_grad():
            out = model(input_ids=x, use_cache=False)
            logits = out.logits
            check(logits.dim() == 3 and logits.shape[:2] == (1, len(ids)),
                  "model(...).logits has shape %s, expected [1, %d, V]" % (tuple(logits.shape), len(ids)))
            logits = logits[0].float()
            bo = base(input_ids=x, use_cache=False)
            hs = getattr(bo, "last_hidden_state", None)
            if hs is None and isinstance(bo, (tuple, list)):
                hs = bo[0]
            check(hs is not None, "model.model(...) returned %s without last_hidden_state" % type(bo).__name__)
            check(hs.dim() == 3 and hs.shape[:2] == (1, len(ids)),
                  "last_hidden_state has shape %s, expected [1, %d, H]" % (tuple(hs.shape), len(ids)))
            hs = hs[0].float()
            # Is last_hidden_state post-final-norm? lm_head of it must give the logits.
            rel = float((head(hs) - logits).abs().max()) / max(float(logits.max() - logits.min()), 1e-30)
            check(rel < 1e-5, "lm_head(last_hidden_state) differs from the logits by %.3g of the logit range: "
                  "last_hidden_state is not the post-final-norm state this script assumes" % rel)
    finally:
        for h in hooks:
            h.remove()
    return logits, hs, captured, rel


def check_inv_freq(model, inv_freq, torch):
    """transformers' rotary inv_freq buffer must equal ours (theta and rotary width)."""
    found = [(n, b) for n, b in model.named_buffers() if n.endswith("inv_freq")]
    if not found:
        print("  NOTE: no inv_freq buffer in the model; RoPE theta/width checked only via the logits")
        return
    for n, b in found:
        check(tuple(b.shape) == tuple(inv_freq.shape),
              "%s has shape %s, ours %s (rotary width differs)" % (n, tuple(b.shape), tuple(inv_freq.shape)))
        d = float((b.float().cpu() - inv_freq).abs().max())
        check(d <= 1e-6 * float(inv_freq.max()), "%s differs from ours by %.3g (theta differs?)" % (n, d))
    print("  rotary inv_freq matches transformers' (%s, %d frequencies)" % (found[0][0], inv_freq.numel()))


# ---------------------------------------------------------------- geometry

class Geo:
    """The numbers the hand-written forward needs, read from config.json (not from transformers)."""

    def __init__(self, cj, spec):
        def need(k):
            check(k in cj, "config.json lacks %r" % k)
            return cj[k]
        self.H = need("hidden_size")
        self.L = need("num_hidden_layers")
        self.nh = need("num_attention_heads")
        self.nkv = need("num_key_value_heads")
        self.hd = cj.get("head_dim") or self.H // self.nh
        rp = cj.get("rope_parameters") or {}
        self.theta = float(rp.get("rope_theta", cj.get("rope_theta", float("nan"))))
        check(not math.isnan(self.theta), "config.json has neither rope_parameters.rope_theta nor rope_theta")
        check(rp.get("rope_type", "default") == "default" and not cj.get("rope_scaling"),
              "rope type %r / rope_scaling %r: only plain RoPE is written here" % (rp.get("rope_type"), cj.get("rope_scaling")))
        self.prf = float(rp.get("partial_rotary_factor", cj.get("partial_rotary_factor", 0.5)))
        self.rot = int(self.hd * self.prf)
        self.eps = float(need("rms_norm_eps"))
        self.V = need("vocab_size")
        self.E = need("n_routed_experts")
        self.topk = need("num_experts_per_tok")
        self.n_group = need("n_group")
        self.topk_group = need("topk_group")
        self.norm_topk = bool(need("norm_topk_prob"))
        self.scale = float(need("routed_scaling_factor"))
        self.I_dense = need("intermediate_size")
        self.I_moe = need("moe_intermediate_size")
        self.n_shared = need("n_shared_experts")
        self.first_dense = need("first_k_dense_replace")
        self.use_qk_norm = bool(need("use_qk_norm"))
        self.attn_bias = bool(need("attention_bias"))
        self.tied = bool(cj.get("tie_word_embeddings", False))
        self.nextn = cj.get("num_nextn_predict_layers", 0)
        check(cj.get("hidden_act", "silu") == "silu", "hidden_act %r, expected silu" % cj.get("hidden_act"))
        check(self.rot % 2 == 0 and 0 < self.rot <= self.hd, "rotary width %d for head_dim %d" % (self.rot, self.hd))
        check(self.nh % self.nkv == 0, "heads %d not a multiple of kv heads %d" % (self.nh, self.nkv))
        check(self.E % self.n_group == 0, "n_routed_experts %d not a multiple of n_group %d" % (self.E, self.n_group))
        check(self.E // self.n_group >= 2, "groups of %d expert(s): the group score is a top-2 sum (as in transformers)"
              % (self.E // self.n_group))
        check(1 <= self.topk_group <= self.n_group, "topk_group %d of n_group %d" % (self.topk_group, self.n_group))
        check(self.topk <= self.topk_group * (self.E // self.n_group), "top-k larger than the experts the kept groups hold")
        check(self.L >= self.first_dense, "the MTP layer (index %d) must be a MoE layer (first_k_dense_replace %d)"
              % (self.L, self.first_dense))
        # The fixture is what ARCHS says it is.
        check(abs(self.theta - float(spec["theta"])) < 1e-9 * self.theta, "theta %g, ARCHS says %g" % (self.theta, spec["theta"]))
        check(self.rot == spec["head_dim"], "rotary width %d, ARCHS' check_rope width %d" % (self.rot, spec["head_dim"]))

    def describe(self):
        return ("H=%d L=%d heads=%d kv=%d head_dim=%d rot=%d theta=%g eps=%g V=%d experts=%d top%d groups=%d/%d "
                "norm_topk=%s scale=%g dense_ffn=%d expert_ffn=%d shared=%d first_dense=%d qk_norm=%s bias=%s tied=%s nextn=%s"
                % (self.H, self.L, self.nh, self.nkv, self.hd, self.rot, self.theta, self.eps, self.V, self.E,
                   self.topk, self.topk_group, self.n_group, self.norm_topk, self.scale, self.I_dense, self.I_moe,
                   self.n_shared, self.first_dense, self.use_qk_norm, self.attn_bias, self.tied, self.nextn))


# ---------------------------------------------------------------- the hand-written forward (float32)
# Written from notes A.2-A.5 and B.1; no transformers code is called here.

def rms_norm(x, w, eps, torch):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def inv_freq_of(geo, torch):
    # theta_j = theta^(-2j/rot), j = 0..rot/2-1
    return 1.0 / (geo.theta ** (torch.arange(0, geo.rot, 2, dtype=torch.int64).float() / geo.rot))


def rope(x, pos, geo, torch):
    """x [T, heads, hd]: rotate the first rot dims, half-split (NEOX) pairing j <-> j+rot/2; the rest pass."""
    half = geo.rot // 2
    ang = pos.float()[:, None] * inv_freq_of(geo, torch)[None, :]      # [T, half]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:geo.rot], x[..., geo.rot:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def attention(a, W, p, pos, geo, torch):
    """GQA causal self-attention among the T rows of a (row order = causal order)."""
    F = torch.nn.functional
    T = a.shape[0]
    bias = (lambda n: W[p + "self_attn.%s_proj.bias" % n]) if geo.attn_bias else (lambda n: None)
    q = F.linear(a, W[p + "self_attn.q_proj.weight"], bias("q")).view(T, geo.nh, geo.hd)
    k = F.linear(a, W[p + "self_attn.k_proj.weight"], bias("k")).view(T, geo.nkv, geo.hd)
    v = F.linear(a, W[p + "self_attn.v_proj.weight"], bias("v")).view(T, geo.nkv, geo.hd)
    if geo.use_qk_norm:  # per head over head_dim, one weight shared by all heads, before RoPE
        q = rms_norm(q, W[p + "self_attn.q_norm.weight"], geo.eps, torch)
        k = rms_norm(k, W[p + "self_attn.k_norm.weight"], geo.eps, torch)
    q, k = rope(q, pos, geo, torch), rope(k, pos, geo, torch)
    rep = geo.nh // geo.nkv  # query head h reads kv head h // rep
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) * (geo.hd ** -0.5)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    s = s.masked_fill(~causal, float("-inf"))
    o = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v).reshape(T, geo.nh * geo.hd)
    return F.linear(o, W[p + "self_attn.o_proj.weight"])  # o_proj has no bias


def swiglu(m, wg, wu, wd, torch):
    F = torch.nn.functional
    return F.linear(F.silu(F.linear(m, wg)) * F.linear(m, wu), wd)


def route(m, W, p, geo, torch):
    """Sigmoid router, notes A.4. Returns (expert ids [T, k], weights [T, k], unbiased scores [T, E])."""
    F = torch.nn.functional
    T = m.shape[0]
    s = F.linear(m.float(), W[p + "mlp.gate.weight"].float()).sigmoid()       # fp32 logits -> scores
    sel = s + W[p + "mlp.gate.e_score_correction_bias"].float()               # bias only for choosing
    gs = geo.E // geo.n_group
    if geo.n_group > 1:
        gscore = sel.view(T, geo.n_group, gs).topk(2, dim=-1).values.sum(-1)  # top-2 sum per group
        keep = gscore.topk(geo.topk_group, dim=-1).indices
        gmask = torch.zeros(T, geo.n_group, dtype=torch.bool).scatter_(1, keep, True)
        emask = gmask[:, :, None].expand(T, geo.n_group, gs).reshape(T, geo.E)
        sel = sel.masked_fill(~emask, float("-inf"))                          # other groups out
    idx = sel.topk(geo.topk, dim=-1).indices
    w = s.gather(1, idx)                                                      # unbiased weights
    if geo.norm_topk:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * geo.scale, s


def moe_ffn(m, W, p, geo, torch):
    idx, w, _ = route(m, W, p, geo, torch)
    out = torch.zeros_like(m)
    for t in range(m.shape[0]):
        for j in range(geo.topk):
            e = int(idx[t, j])
            ep = p + "mlp.experts.%d." % e
            out[t] += w[t, j] * swiglu(m[t:t + 1], W[ep + "gate_proj.weight"], W[ep + "up_proj.weight"],
                                       W[ep + "down_proj.weight"], torch)[0]
    sp = p + "mlp.shared_experts."
    return out + swiglu(m, W[sp + "gate_proj.weight"], W[sp + "up_proj.weight"], W[sp + "down_proj.weight"], torch)


def decoder_layer(x, W, p, pos, geo, moe, torch):
    """Pre-norm layer, notes A.2: x += attn(norm(x)); x += ffn(norm(x))."""
    x = x + attention(rms_norm(x, W[p + "input_layernorm.weight"], geo.eps, torch), W, p, pos, geo, torch)
    m = rms_norm(x, W[p + "post_attention_layernorm.weight"], geo.eps, torch)
    if moe:
        f = moe_ffn(m, W, p, geo, torch)
    else:
        f = swiglu(m, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"], W[p + "mlp.down_proj.weight"], torch)
    return x + f


def trunk_forward(ids, W, geo, torch):
    """Hand-written trunk: returns (logits [n, V], post-norm h [n, H], per-layer outputs)."""
    x = W["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
    pos = torch.arange(len(ids))
    outs = []
    for l in range(geo.L):
        x = decoder_layer(x, W, "model.layers.%d." % l, pos, geo, l >= geo.first_dense, torch)
        outs.append(x)
    h = rms_norm(x, W["model.norm.weight"], geo.eps, torch)
    head = W["model.embed_tokens.weight"] if geo.tied else W["lm_head.weight"]
    return torch.nn.functional.linear(h, head), h, outs


def mtp_forward(h, xs, pos, W, geo, N, torch, emb=None, swap=False, final_norm=None):
    """One MTP step over pairs (h[i], xs[i]) at positions pos[i], notes B.1:
    u = eh_proj [enorm(E_mtp[x]) ; hnorm(h)] -> decoder layer N (MoE) -> shared_head.norm -> shared_head.head.
    emb / swap / final_norm only exist to show what common mistakes would change."""
    F = torch.nn.functional
    p = "model.layers.%d." % N
    E = W[p + "embed_tokens.weight"] if emb is None else emb
    e = rms_norm(E[torch.tensor(xs, dtype=torch.long)], W[p + "enorm.weight"], geo.eps, torch)
    g = rms_norm(h, W[p + "hnorm.weight"], geo.eps, torch)
    u = F.linear(torch.cat([g, e] if swap else [e, g], dim=-1), W[p + "eh_proj.weight"])  # embedding first
    y = decoder_layer(u, W, p, pos, geo, True, torch)
    z = rms_norm(y, W[p + "shared_head.norm.weight"] if final_norm is None else final_norm, geo.eps, torch)
    return F.linear(z, W[p + "shared_head.head.weight"])


# ---------------------------------------------------------------- MTP weights

def make_mtp_weights(geo, N, gate_mult, torch, seed=MTP_SEED):
    """The MTP layer's tensors, drawn in a fixed order from their own generator, rounded to bf16.
    Returns an ordered dict name -> bf16 tensor."""
    g = torch.Generator().manual_seed(seed)
    p = "model.layers.%d." % N
    out = {}

    def randn(shape):
        return torch.randn(list(shape), generator=g, dtype=torch.float32)

    def weight(name, shape, std):
        out[p + name] = std * randn(shape)

    def norm(name, n):
        out[p + name] = 1.0 + NORM_JITTER * randn([n])

    def bias(name, n):
        out[p + name] = BIAS_STD * randn([n])

    H, V, qd, kvd = geo.H, geo.V, geo.nh * geo.hd, geo.nkv * geo.hd
    weight("embed_tokens.weight", (V, H), STD)          # its own values: a loader using the trunk's fails
    norm("enorm.weight", H)
    norm("hnorm.weight", H)
    weight("eh_proj.weight", (H, 2 * H), STD / math.sqrt(2.0))
    norm("input_layernorm.weight", H)
    for n, d in (("q", qd), ("k", kvd), ("v", kvd)):
        weight("self_attn.%s_proj.weight" % n, (d, H), STD)
        if geo.attn_bias:
            bias("self_attn.%s_proj.bias" % n, d)
    weight("self_attn.o_proj.weight", (H, qd), STD)
    if geo.use_qk_norm:
        norm("self_attn.q_norm.weight", geo.hd)
        norm("self_attn.k_norm.weight", geo.hd)
    norm("post_attention_layernorm.weight", H)
    weight("mlp.gate.weight", (geo.E, H), STD * gate_mult)
    out[p + "mlp.gate.e_score_correction_bias"] = (ESCB_STD * randn([geo.E])).abs()  # >= 0, as init_params
    for e in range(geo.E):
        weight("mlp.experts.%d.gate_proj.weight" % e, (geo.I_moe, H), STD)
        weight("mlp.experts.%d.up_proj.weight" % e, (geo.I_moe, H), STD)
        weight("mlp.experts.%d.down_proj.weight" % e, (H, geo.I_moe), STD)
    Is = geo.I_moe * geo.n_shared
    weight("mlp.shared_experts.gate_proj.weight", (Is, H), STD)
    weight("mlp.shared_experts.up_proj.weight", (Is, H), STD)
    weight("mlp.shared_experts.down_proj.weight", (H, Is), STD)
    norm("shared_head.norm.weight", H)
    weight("shared_head.head.weight", (V, H), STD * HEAD_MULT)
    return {k: v.to(torch.bfloat16) for k, v in out.items()}


def check_mtp_names(mtp, trunk, geo, N):
    """The MTP decoder-layer tensors must carry a trunk MoE layer's names and shapes."""
    ref_l = geo.first_dense  # the first MoE layer of the trunk
    rp, mp = "model.layers.%d." % ref_l, "model.layers.%d." % N
    trunk_layer = {k[len(rp):]: tuple(v.shape) for k, v in trunk.items() if k.startswith(rp)}
    mtp_only = {"embed_tokens.weight", "enorm.weight", "hnorm.weight", "eh_proj.weight",
                "shared_head.norm.weight", "shared_head.head.weight"}
    mtp_layer = {k[len(mp):]: tuple(v.shape) for k, v in mtp.items() if k[len(mp):] not in mtp_only}
    check(set(mtp_layer) == set(trunk_layer),
          "MTP decoder-layer names differ from trunk layer %d's: extra %s, missing %s"
          % (ref_l, sorted(set(mtp_layer) - set(trunk_layer))[:8], sorted(set(trunk_layer) - set(mtp_layer))[:8]))
    bad = [k for k in mtp_layer if mtp_layer[k] != trunk_layer[k]]
    check(not bad, "MTP tensor shapes differ from the trunk's: %s" % [(k, mtp_layer[k], trunk_layer[k]) for k in bad[:6]])
    clash = sorted(set(mtp) & set(trunk))
    check(not clash, "MTP tensor names already in the checkpoint: %s" % clash[:6])
    print("  MTP layer: %d tensors; its decoder part has trunk layer %d's %d names and shapes"
          % (len(mtp), ref_l, len(trunk_layer)))


# ---------------------------------------------------------------- steps

def build_fixtures(mod, args, corpus_lines, torch):
    """Step 1: the fixture with num_nextn_predict_layers=1 in OUT/glm4_moe, and the same without the field."""
    nofield_root = None
    if not args.skip_nofield:
        nofield_root = tempfile.mkdtemp(prefix="mtp_nofield_")
        banner("build as make-reference.py does, num_nextn_predict_layers=%r (%s)"
               % (mod.ARCHS[ARCH]["cfg"].get("num_nextn_predict_layers", "<absent>"), nofield_root))
        mod.build_arch(ARCH, corpus_lines, nofield_root)   # ARCHS unmodified
    banner("build with num_nextn_predict_layers=1 (%s)" % args.out)
    with patched_nextn(mod, 1):
        mod.build_arch(ARCH, corpus_lines, args.out)
    return nofield_root


def compare_builds(mod, d_new, d_old, label, strict, torch):
    """Compare two glm4_moe fixture directories: weights, reference.txt, tokenizer, config, logits."""
    banner("compare %s" % label)
    problems = []
    a, _ = mod.load_saved_tensors(d_new)
    b, _ = mod.load_saved_tensors(d_old)
    if set(a) != set(b):
        problems.append("tensor names differ: only new %s, only old %s"
                        % (sorted(set(a) - set(b))[:6], sorted(set(b) - set(a))[:6]))
    neq = [k for k in sorted(set(a) & set(b)) if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
           or not torch.equal(a[k], b[k])]
    print("  tensors: %d vs %d, %d common differ%s" % (len(a), len(b), len(neq), (": %s" % neq[:6]) if neq else ""))
    if neq:
        problems.append("%d tensors differ, e.g. %s" % (len(neq), neq[:4]))
    for fn in ("reference.txt", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        pa, pb = os.path.join(d_new, fn), os.path.join(d_old, fn)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            print("  %s: missing on one side" % fn)
            continue
        with open(pa, "rb") as fa, open(pb, "rb") as fb:
            same = fa.read() == fb.read()
        print("  %s: %s" % (fn, "identical" if same else "DIFFERENT"))
        if not same:
            problems.append("%s differs" % fn)
    with open(os.path.join(d_new, "config.json")) as f:
        ca = json.load(f)
    with open(os.path.join(d_old, "config.json")) as f:
        cb = json.load(f)
    cdiff = {k: (ca.get(k), cb.get(k)) for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)}
    print("  config.json differences (new, old):", cdiff)
    if set(cdiff) - {"num_nextn_predict_layers", "transformers_version"}:
        problems.append("config.json differs beyond num_nextn_predict_layers: %s" % sorted(cdiff))
    # logits of the two reloaded models on the fixture's prompts (ids from d_new's reference.txt)
    _, recs, _ = read_reference(os.path.join(d_new, "reference.txt"))
    ma, _ = mod.load_model(d_new)
    mb, _ = mod.load_model(d_old)
    diff = 0.0
    with torch.no_grad():
        for p in sorted(recs.get("prompt", {})):
            ids = [int(t) for t in recs["prompt"][p][1:]]
            x = torch.tensor([ids], dtype=torch.long)
            la = ma(input_ids=x, use_cache=False).logits.float()
            lb = mb(input_ids=x, use_cache=False).logits.float()
            if la.shape != lb.shape:
                problems.append("logit shapes differ %s vs %s" % (tuple(la.shape), tuple(lb.shape)))
                continue
            diff = max(diff, float((la - lb).abs().max()))
    print("  reloaded models: max |logit diff| over all prompt positions = %.3g" % diff)
    if diff > 0.0:
        problems.append("reloaded models' logits differ by %.3g" % diff)
    del ma, mb
    if problems:
        msg = "%s: %s" % (label, "; ".join(problems))
        if strict:
            raise CheckFailed(msg)
        print("  NOTE (not fatal):", msg)
    return diff


def ensure_config_nextn(d):
    """config.json must say num_nextn_predict_layers: 1 (the C loader reads it)."""
    path = os.path.join(d, "config.json")
    with open(path) as f:
        cj = json.load(f)
    if cj.get("num_nextn_predict_layers") == 1:
        print("  config.json: num_nextn_predict_layers = 1")
        return cj, False
    print("  WARNING: save_pretrained wrote num_nextn_predict_layers=%r; patching config.json to 1"
          % cj.get("num_nextn_predict_layers", "<absent>"))
    cj["num_nextn_predict_layers"] = 1
    with open(path, "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
        f.write("\n")
    return cj, True


def append_tensors(mod, d, new, torch):
    """Rewrite model.safetensors with all old tensors plus new (bf16), metadata {'format': 'pt'}."""
    from safetensors.torch import load_file, save_file
    files = mod.weight_files(d)
    check(files == ["model.safetensors"], "expected one model.safetensors in %s, found %s (sharded?)" % (d, files))
    path = os.path.join(d, "model.safetensors")
    old = load_file(path)
    allt = {k: v.contiguous() for k, v in old.items()}
    for k, v in new.items():
        check(k not in allt, "%s already in model.safetensors" % k)
        allt[k] = v.contiguous()
    tmp = path + ".tmp"
    save_file(allt, tmp, metadata={"format": "pt"})
    os.replace(tmp, path)
    back = load_file(path)
    check(set(back) == set(allt), "re-read model.safetensors has %d tensors, wrote %d" % (len(back), len(allt)))
    bad = [k for k in allt if back[k].dtype != allt[k].dtype or not torch.equal(back[k], allt[k])]
    check(not bad, "tensors changed in the rewrite: %s" % bad[:6])
    print("  model.safetensors: %d old + %d MTP tensors, %d bytes, dtypes %s"
          % (len(old), len(new), os.path.getsize(path), sorted({str(v.dtype) for v in back.values()})))


def reload_check(mod, d, model, prompts, N, torch):
    """Reload the fixture (now with model.layers.N.*) and check transformers ignores the MTP tensors:
    nothing missing or mismatched, and the trunk logits bit-identical to the model loaded before."""
    try:
        model2, info2 = mod.load_model(d)
    except Exception as ex:
        raise CheckFailed("transformers cannot load the fixture with model.layers.%d.* present: %r" % (N, ex))
    info2 = info2 or {}
    unexpected = sorted(str(k) for k in (info2.get("unexpected_keys", []) or []))
    missing = sorted(str(k) for k in (info2.get("missing_keys", []) or []))
    print("  loading info: %d unexpected (e.g. %s), %d missing %s"
          % (len(unexpected), unexpected[:3], len(missing), missing[:6]))
    check(not missing, "transformers reports missing keys after the MTP tensors were added: %s" % missing[:8])
    mism = list(info2.get("mismatched_keys", []) or [])
    check(not mism, "transformers reports mismatched keys after the MTP tensors were added: %s" % mism[:8])
    stray = [k for k in unexpected if ("layers.%d." % N) not in k]
    if stray:
        print("  WARNING: unexpected keys outside model.layers.%d.*: %s" % (N, stray[:8]))
    if not unexpected:
        print("  NOTE: transformers reported no unexpected keys: it ignored (or consumed) model.layers.%d.* silently" % N)
    diff = 0.0
    with torch.no_grad():
        for pr in prompts:
            x = torch.tensor([pr["ids"]], dtype=torch.long)
            a = model(input_ids=x, use_cache=False).logits
            b = model2(input_ids=x, use_cache=False).logits
            check(a.shape == b.shape, "logit shapes differ after reload: %s vs %s" % (tuple(a.shape), tuple(b.shape)))
            diff = max(diff, float((a - b).abs().max()))
    print("  trunk logits with vs without the MTP tensors in the file: max |diff| %.3g" % diff)
    check(diff == 0.0, "the trunk's logits changed when the MTP tensors were added (%.3g)" % diff)
    return diff

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True, help="output root; the fixture is written to OUT/glm4_moe")
    ap.add_argument("--make-reference", default=None, help="path of tools/make-reference.py (default: the repo's)")
    ap.add_argument("--skip-nofield", action="store_true", help="skip the build without the field and its comparison")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the no-field build")
    ap.add_argument("--lenient", action="store_true",
                    help="report a with/without-field difference instead of stopping on it")
    ap.add_argument("--committed", default=None,
                    help="a committed glm4_moe fixture to compare with, informational (default: the repo's tests/data/glm4_moe)")
    args = ap.parse_args()

    import torch
    import tokenizers
    import transformers
    try:
        import safetensors
        st_ver = safetensors.__version__
    except Exception:
        st_ver = "?"
    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch %s, transformers %s, tokenizers %s, safetensors %s, python %s"
          % (torch.__version__, transformers.__version__, tokenizers.__version__, st_ver, sys.version.split()[0]))
    if not transformers.__version__.startswith("5."):
        print("WARNING: make-reference.py is written for transformers 5.x; this is %s" % transformers.__version__)

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mod = load_make_reference(args.make_reference or os.path.join(repo, "tools", "make-reference.py"))
    spec = mod.ARCHS[ARCH]
    gate_mult = spec.get("gate_mult", 8.0)  # build_arch's default
    os.makedirs(args.out, exist_ok=True)
    d = os.path.join(args.out, ARCH)
    corpus_lines = mod.read_corpus_lines(args.corpus)
    print("corpus: %s (%d lines)" % (args.corpus, len(corpus_lines)))

    banner("precheck: does num_nextn_predict_layers change the model transformers builds?")
    precheck_param_names(mod, torch)

    # ---- 1. the fixture, with and without the field
    nofield_root = build_fixtures(mod, args, corpus_lines, torch)
    nofield_diff = float("nan")
    if nofield_root:
        nofield_diff = compare_builds(mod, d, os.path.join(nofield_root, ARCH),
                                      "with vs without num_nextn_predict_layers", not args.lenient, torch)
        if not args.keep_tmp:
            shutil.rmtree(nofield_root, ignore_errors=True)
    committed = args.committed or os.path.join(repo, "tests", "data", ARCH)
    if os.path.isdir(committed) and os.path.exists(os.path.join(committed, "model.safetensors")):
        try:
            compare_builds(mod, d, committed, "new trunk vs committed fixture %s" % committed, False, torch)
        except Exception as ex:
            print("  NOTE: comparison with the committed fixture failed: %r" % ex)

    banner("fixture %s" % d)
    cj, cfg_patched = ensure_config_nextn(d)
    geo = Geo(cj, spec)
    print("  geometry:", geo.describe())
    N = geo.L
    ref_path = os.path.join(d, "reference.txt")
    ref_text, recs, ref_vocab = read_reference(ref_path)
    check(not any(k.startswith("mtp_") for k in recs), "reference.txt already has mtp_ lines")
    check(ref_vocab == geo.V, "reference.txt vocab %r, config %d" % (ref_vocab, geo.V))

    # The trunk's tensors, by their published names, as float32.
    trunk16, _ = mod.load_saved_tensors(d)
    want = mod.expected_keys(ARCH, _SimpleCfg(cj))
    check(set(trunk16) == want, "fixture tensors are not the published per-expert trunk names: extra %s, missing %s"
          % (sorted(set(trunk16) - want)[:6], sorted(want - set(trunk16))[:6]))
    check(not any(k.startswith("model.layers.%d." % N) for k in trunk16), "model.layers.%d.* already present" % N)
    W = {k: v.float() for k, v in trunk16.items()}

    # ---- reload the trunk in float32 through transformers (make-reference's load_model)
    model, info = mod.load_model(d)
    print("  reloaded %s (attn %s); loading info: %s" % (type(model).__name__,
          getattr(model.config, "_attn_implementation", "?"),
          {k: (len(v) if hasattr(v, "__len__") else v) for k, v in (info or {}).items() if k != "error_msgs"}))
    _, _, hf_layers = submodel_and_head(model)
    check(len(hf_layers) == geo.L, "transformers model has %d layers, config %d" % (len(hf_layers), geo.L))
    check_inv_freq(model, inv_freq_of(geo, torch), torch)

    # ---- 3a. cross-check the hand-written layer on the trunk against transformers
    banner("cross-check: hand-written trunk vs transformers")
    tok_path = os.path.join(d, "tokenizer.json")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    prompts = []
    worst_rel, worst_abs = 0.0, 0.0
    with torch.no_grad():
        for p, (text, n) in enumerate(mod.prompt_texts(ARCH)):
            ids = tok.encode(text, add_special_tokens=True).ids[:n]   # as write_reference truncates
            rec = recs.get("prompt", {}).get(p)
            check(rec is not None and [int(t) for t in rec[1:]] == ids,
                  "prompt %d ids %s differ from reference.txt's %s" % (p, ids, rec))
            hf_logits, hf_h, hf_layer_out, post_rel = hf_forward(model, ids, torch)
            my_logits, my_h, my_outs = trunk_forward(ids, W, geo, torch)
            rng = float(hf_logits.max() - hf_logits.min())
            dabs = float((my_logits - hf_logits).abs().max())
            rel = dabs / rng
            hdiff = float((my_h - hf_h).abs().max())
            per_layer = ["%.2g" % float((my_outs[l] - hf_layer_out[l]).abs().max()) if l in hf_layer_out else "n/a"
                         for l in range(geo.L)]
            same_argmax = int((my_logits.argmax(-1) == hf_logits.argmax(-1)).sum())
            print("  prompt %d (%d tokens): max|dlogit| %.3g (range %.3g, rel %.3g), max|dh| %.3g, per-layer max|d| %s,"
                  " argmax agree %d/%d, lm_head(h) vs logits rel %.2g"
                  % (p, len(ids), dabs, rng, rel, hdiff, per_layer, same_argmax, len(ids), post_rel))
            worst_rel, worst_abs = max(worst_rel, rel), max(worst_abs, dabs)
            g0 = int(hf_logits[-1].argmax())
            gref = recs.get("greedy", {}).get(p)
            check(gref is not None and int(gref[1]) == g0,
                  "prompt %d: trunk argmax %d differs from reference.txt's first greedy token %s" % (p, g0, gref and gref[1]))
            prompts.append(dict(p=p, ids=ids, h=hf_h, g0=g0, pre_norm=my_outs[-1]))
    print("  cross-check worst: max|dlogit| %.3g, relative to the logit range %.3g (tolerance %g)"
          % (worst_abs, worst_rel, XCHECK_REL_TOL))
    check(worst_rel < XCHECK_REL_TOL, "the hand-written glm4_moe layer does not reproduce transformers "
          "(relative %.3g >= %g); see the per-layer differences above" % (worst_rel, XCHECK_REL_TOL))

    # ---- 2. MTP weights, appended to model.safetensors
    banner("MTP weights (model.layers.%d.*, seed %d)" % (N, MTP_SEED))
    mtp16 = make_mtp_weights(geo, N, gate_mult, torch)
    check_mtp_names(mtp16, trunk16, geo, N)
    for k, v in mtp16.items():
        if ".experts." not in k or ".experts.0." in k:
            print("    %-60s %-14s std %.4f mean %.4f" % (k, list(v.shape), float(v.float().std()) if v.numel() > 1 else 0.0,
                                                       float(v.float().mean())))
    escb_dtype = trunk16["model.layers.%d.mlp.gate.e_score_correction_bias" % geo.first_dense].dtype
    if escb_dtype != torch.bfloat16:  # store like the trunk stores its own (values stay bf16-exact)
        k = "model.layers.%d.mlp.gate.e_score_correction_bias" % N
        mtp16[k] = mtp16[k].to(escb_dtype)
        print("  e_score_correction_bias stored as %s, like the trunk's" % escb_dtype)
    append_tensors(mod, d, mtp16, torch)
    from safetensors.torch import load_file
    stored = load_file(os.path.join(d, "model.safetensors"))
    for k in mtp16:
        W[k] = stored[k].float()       # compute from what the file holds
    del stored

    # ---- 3b. the MTP draft logits
    banner("MTP draft logits")
    lines, last_margins, pair_margins = [], [], []
    mist = {"swapped concat [h;e]": 0, "trunk embed_tokens": 0, "pre-norm h": 0, "model.norm for shared_head.norm": 0}
    mist_d = dict.fromkeys(mist, 0.0)
    pos_shift_d, incr_d, total_pairs = 0.0, 0.0, 0
    with torch.no_grad():
        for pr in prompts:
            p, ids, h, g0 = pr["p"], pr["ids"], pr["h"], pr["g0"]
            n = len(ids)
            xs = ids[1:] + [g0]                  # pair (h_i, t_{i+1}); the last pair is (h_{n-1}, g_0)
            pos = torch.arange(0, n)             # pair i at position i (libcolibri's and vLLM's convention)
            logits = mtp_forward(h, xs, pos, W, geo, N, torch)
            check(tuple(logits.shape) == (n, geo.V), "draft logits shape %s" % (tuple(logits.shape),))
            check(bool(torch.isfinite(logits).all()), "non-finite draft logits at prompt %d" % p)
            argmax = [int(t) for t in logits.argmax(-1)]
            margins = [mod.top_margin(logits[i]) for i in range(n)]
            last = logits[-1]
            # causality: each pair's logits from its prefix alone (a one-pair-at-a-time cache) are the same
            for j in range(n):
                lj = mtp_forward(h[:j + 1], xs[:j + 1], pos[:j + 1], W, geo, N, torch)[-1]
                incr_d = max(incr_d, float((lj - logits[j]).abs().max()))
            # RoPE is relative: positions i+1 instead of i change nothing but rounding
            pos_shift_d = max(pos_shift_d, float((mtp_forward(h, xs, pos + 1, W, geo, N, torch) - logits).abs().max()))
            # what typical loader mistakes would change (informational)
            variants = {
                "swapped concat [h;e]": mtp_forward(h, xs, pos, W, geo, N, torch, swap=True),
                "trunk embed_tokens": mtp_forward(h, xs, pos, W, geo, N, torch, emb=W["model.embed_tokens.weight"]),
                "pre-norm h": mtp_forward(pr["pre_norm"], xs, pos, W, geo, N, torch),
                "model.norm for shared_head.norm": mtp_forward(h, xs, pos, W, geo, N, torch, final_norm=W["model.norm.weight"]),
            }
            for k, v in variants.items():
                mist[k] += int((v.argmax(-1) != logits.argmax(-1)).sum())
                mist_d[k] = max(mist_d[k], float((v - logits).abs().max()))
            total_pairs += n
            last_margins.append(margins[-1])
            pair_margins.extend(margins)
            print("  prompt %d: %d pairs, last pair (h_%d, g0=%d) -> argmax %d margin %.4f; min pair margin %.4f;"
                  " argmax %s" % (p, n, n - 1, g0, argmax[-1], margins[-1], min(margins), argmax))
            if margins[-1] < NEAR_TIE:
                print("  WARNING: prompt %d's last-pair margin %.3g is a near-tie" % (p, margins[-1]))
            lines.append("mtp_pairs %d %d%s" % (p, n, "".join(" %d" % t for t in xs)))
            lines.append("mtp_logits %d %d %s" % (p, last.numel(), " ".join(mod.fmt(v) for v in last.tolist())))
            lines.append("mtp_argmax %d %d%s" % (p, n, "".join(" %d" % t for t in argmax)))
            lines.append("mtp_margin %d %s" % (p, mod.fmt(margins[-1])))
            # extra record (not in the brief): every pair's margin, to tell a mismatch from a near-tie
            lines.append("mtp_argmax_margins %d %d %s" % (p, n, " ".join(mod.fmt(m) for m in margins)))
    print("  one-pair-at-a-time vs batched: max |diff| %.3g; positions i vs i+1: max |diff| %.3g" % (incr_d, pos_shift_d))
    check(incr_d < 1e-4, "batched MTP logits depend on later pairs (%.3g): the causal mask is wrong" % incr_d)
    for k in mist:
        print("  mistake %-34s changes %3d/%d argmaxes, max |dlogit| %.3g" % (k, mist[k], total_pairs, mist_d[k]))
        if mist[k] == 0:
            print("  NOTE: the fixture's argmaxes do not catch %r; only its logits do" % k)

    # ---- 4. append to reference.txt (existing text unchanged)
    with open(ref_path, encoding="ascii") as f:
        before = f.read()
    check(before == ref_text, "reference.txt changed while this script ran")
    with open(ref_path, "w", encoding="ascii") as f:
        f.write(before if before.endswith("\n") else before + "\n")
        f.write("\n".join(lines) + "\n")
    after, recs2, _ = read_reference(ref_path)
    check(after.startswith(before), "reference.txt's old lines changed")
    for pr in prompts:
        p = pr["p"]
        vals = recs2["mtp_logits"][p]
        check(int(vals[0]) == geo.V and len(vals) == geo.V + 1, "mtp_logits %d re-read badly" % p)
    print("  reference.txt: %d lines appended" % len(lines))

    # ---- transformers must still load the fixture and ignore model.layers.N.* (checked last, so that
    # the files are complete even if this fails; a failure makes the exit status nonzero)
    banner("reload with the MTP tensors present")
    reload_diff, reload_err = float("nan"), None
    try:
        reload_diff = reload_check(mod, d, model, prompts, N, torch)
    except Exception as ex:
        reload_err = "%s: %s" % (type(ex).__name__, ex)
        print("  RELOAD CHECK FAILED:", reload_err)

    # ---- 5. summary
    print("  files:")
    for fn in sorted(os.listdir(d)):
        print("    %-40s %9d bytes" % (fn, os.path.getsize(os.path.join(d, fn))))
    print("SUMMARY mtp: fixture=%s mtp_layer=%d min_mtp_margin(last pair)=%.5f min_mtp_margin(all pairs)=%.5f "
          "trunk_xcheck_max_abs=%.3g trunk_xcheck_rel=%.3g nofield_logit_diff=%s reload_with_mtp_diff=%.3g "
          "incremental_diff=%.3g config_patched=%s reload_check=%s"
          % (d, N, min(last_margins), min(pair_margins), worst_abs, worst_rel,
             "skipped" if math.isnan(nofield_diff) else "%.3g" % nofield_diff, reload_diff, incr_d,
             "yes" if cfg_patched else "no", "FAILED" if reload_err else "ok"))
    if reload_err:
        raise CheckFailed("the fixture was written, but transformers does not load it as assumed: %s" % reload_err)


class _SimpleCfg:
    """What make-reference's expected_keys reads, from config.json (no transformers config needed)."""

    def __init__(self, cj):
        self.tie_word_embeddings = bool(cj.get("tie_word_embeddings", False))
        self.num_hidden_layers = cj["num_hidden_layers"]
        self.use_qk_norm = bool(cj.get("use_qk_norm", False))
        self.attention_bias = bool(cj.get("attention_bias", False))
        self.first_k_dense_replace = cj["first_k_dense_replace"]
        self.n_routed_experts = cj["n_routed_experts"]
        self.moe_intermediate_size = cj["moe_intermediate_size"]
        self.intermediate_size = cj["intermediate_size"]


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as ex:
        print("\nCHECK FAILED: %s" % ex, flush=True)
        sys.exit(2)
    except Exception:
        traceback.print_exc()
        print("\nFAILED (unexpected error above)", flush=True)
        sys.exit(1)
    print("all done")
