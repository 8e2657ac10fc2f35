#!/usr/bin/env python3
"""Train the small GLM-4.5-shaped demo model with a multi-token-prediction layer.

Usage: python3 tools/train-glm-demo.py --corpus corpus/kjv.txt --out DIR
           [--minutes M] [--steps N] [--seed S] [--mtp-weight W] ...

The model is transformers' Glm4MoeForCausalLM in miniature: one dense leading
layer, then MoE layers with a sigmoid router over expert groups (a correction
bias, group-limited top-k, routed scaling), a shared expert, q/k/v biases,
per-head q/k norms and RoPE on half of each head. One MTP (NextN) layer is
trained jointly, as DeepSeek-V3 and GLM-4.5 do: from the decoder's state h_i
after its final norm and the token t_{i+1}, it predicts t_{i+2}:

    u = eh_proj [enorm(E[t_{i+1}]) ; hnorm(h_i)]  ->  a MoE decoder layer
      ->  shared_head.norm  ->  the model's output projection

at position i of its own attention (docs/formats.md, "Multi-token
prediction"). Its embedding and head are the model's (shared, as DeepSeek
documents them), so the checkpoint stores neither again.

The loss is the decoder's cross-entropy plus --mtp-weight times the MTP
layer's. The tokenizer is tools/train-demo.py's (the same corpus and vocabulary
give the same one). Writes DIR/config.json (num_hidden_layers of the decoder,
num_nextn_predict_layers 1), model.safetensors (bf16, per-expert tensor names,
the MTP layer under model.layers.N), tokenizer.json, tokenizer_config.json and
generation_config.json; then, from the saved weights in float32, prints the
greedy continuation of "In the beginning" and how often the MTP layer's draft
is the decoder's next greedy token along it.

Needs torch, transformers (5.x), tokenizers and safetensors.
"""

import argparse
import importlib.util
import math
import os
import shutil
import time


def load_module(name, file):
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(name, os.path.join(here, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODEL = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=128, num_hidden_layers=4,
             first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
             partial_rotary_factor=0.5, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
             n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5, use_qk_norm=True,
             attention_bias=True, tie_word_embeddings=True, rms_norm_eps=1e-5, max_position_embeddings=512,
             hidden_act="silu", initializer_range=0.02, num_nextn_predict_layers=1)
ROPE_THETA = 10000.0
PROMPT = "In the beginning"


def make_config(V, eot):
    from transformers import AutoConfig
    fields = dict(MODEL, vocab_size=V, bos_token_id=eot, eos_token_id=eot)
    try:
        return AutoConfig.for_model("glm4_moe", rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA,
                                                                  "partial_rotary_factor": 0.5}, **fields)
    except Exception as ex:
        print("rope_parameters not accepted (%s); using rope_theta" % ex)
        return AutoConfig.for_model("glm4_moe", rope_theta=ROPE_THETA, **fields)


class MTP:
    """The MTP layer: its own modules around a transformers decoder layer."""

    @staticmethod
    def build(cfg):
        import torch.nn as nn
        from transformers.models.glm4_moe import modeling_glm4_moe as g
        H, N = cfg.hidden_size, cfg.num_hidden_layers

        class Module(nn.Module):
            def __init__(self):
                super().__init__()
                self.eh_proj = nn.Linear(2 * H, H, bias=False)
                self.enorm = g.Glm4MoeRMSNorm(H, eps=cfg.rms_norm_eps)
                self.hnorm = g.Glm4MoeRMSNorm(H, eps=cfg.rms_norm_eps)
                self.head_norm = g.Glm4MoeRMSNorm(H, eps=cfg.rms_norm_eps)
                self.block = g.Glm4MoeDecoderLayer(cfg, layer_idx=N)

            def forward(self, h, next_ids, model):
                import torch
                e = self.enorm(model.model.embed_tokens(next_ids))
                u = self.eh_proj(torch.cat([e, self.hnorm(h)], dim=-1))  # embedding first, then the state
                pos = torch.arange(u.shape[1], device=u.device)[None].expand(u.shape[0], -1)
                cos, sin = model.model.rotary_emb(u, pos)
                y = self.block(u, attention_mask=None, position_ids=pos, position_embeddings=(cos, sin))
                if isinstance(y, tuple):
                    y = y[0]
                return model.lm_head(self.head_norm(y))

        return Module()


def build_model(cfg, attn):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        model.get_output_embeddings().weight = model.get_input_embeddings().weight
    mtp = MTP.build(model.config)
    # built outside from_config, its parameters (the fused experts' are
    # torch.empty) get the model's initialisation here
    mtp.apply(model._init_weights)
    bad = [n for n, p in mtp.named_parameters() if not bool(p.detach().isfinite().all()) or float(p.detach().abs().max()) > 100]
    if bad:
        raise RuntimeError("MTP parameters not initialised: %s" % bad[:6])
    return model, mtp


def losses(model, mtp, x, y, V):
    """The decoder's and the MTP layer's cross-entropy on one batch."""
    import torch.nn.functional as F
    out = model.model(input_ids=x, use_cache=False)
    h = out.last_hidden_state                  # after the final norm
    main = F.cross_entropy(model.lm_head(h).float().reshape(-1, V), y.reshape(-1))
    # pair (h_i, t_{i+1}) predicts t_{i+2}: states 0..T-2, tokens x[1..T-1], targets y[1..T-1]
    d = mtp(h[:, :-1], x[:, 1:], model)
    side = F.cross_entropy(d.float().reshape(-1, V), y[:, 1:].reshape(-1))
    return main, side


def train(model, mtp, data, args, device):
    import torch
    n = data.numel()
    n_val = max(n // 100, args.ctx * 8 + 1)
    train_data, val_data = data[:-n_val], data[-n_val:]
    T, B = args.ctx, args.batch
    offs = torch.arange(T + 1, device=device)
    gen = torch.Generator(device=device).manual_seed(args.seed)

    def batch(src, g=gen):
        i = torch.randint(0, src.numel() - T - 1, (B,), device=device, generator=g)
        s = src[i[:, None] + offs]
        return s[:, :-1], s[:, 1:]

    params = list(model.parameters()) + list(mtp.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, fused=(device == "cuda"), lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    except Exception:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    V = model.config.vocab_size
    amp = dict(device_type="cuda", dtype=torch.bfloat16) if device == "cuda" else dict(device_type="cpu", enabled=False)
    budget = args.minutes * 60.0 if args.minutes is not None else None
    warmup = 200
    t0 = time.time()
    step, hist = 0, []
    model.train()
    mtp.train()
    while True:
        el = time.time() - t0
        if args.steps is not None and step >= args.steps:
            break
        if budget is not None and el >= budget:
            print("time limit of %g minutes reached" % args.minutes)
            break
        frac = step / args.steps if args.steps is not None else el / budget
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train_data)
        with torch.autocast(**amp):
            main, side = losses(model, mtp, x, y, V)
        opt.zero_grad(set_to_none=True)
        (main + args.mtp_weight * side).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        hist.append(torch.stack([main.detach(), side.detach()]))
        step += 1
        if step % 100 == 0 or step == 1:
            l = torch.stack(hist).mean(0).tolist()
            hist = []
            el = time.time() - t0
            print("step %5d  %6.1fs  loss %.4f  mtp loss %.4f  lr %.2e  %.0f tok/s"
                  % (step, el, l[0], l[1], lr, step * B * T / max(el, 1e-9)), flush=True)
    el = time.time() - t0
    print("trained %d steps in %.1fs (%.0f tokens, %.2f epochs of %d training tokens)"
          % (step, el, step * B * T, step * B * T / train_data.numel(), train_data.numel()))
    model.eval()
    mtp.eval()
    vg = torch.Generator(device=device).manual_seed(12345)
    with torch.no_grad(), torch.autocast(**amp):
        vl = [losses(model, mtp, x, y, V) for x, y in (batch(val_data, vg) for _ in range(16))]
    print("final held-out loss (last 1%% of corpus): decoder %.4f, MTP %.4f"
          % (sum(float(a) for a, _ in vl) / len(vl), sum(float(b) for _, b in vl) / len(vl)))


def published_mtp(mr, cfg, model, mtp):
    """The MTP layer's tensors under published names (model.layers.N.*), found
    by saving a model of N + 1 layers whose last is the MTP block (the per-
    expert names come from make-reference.py's converter, checked by reload)."""
    import copy
    import tempfile
    import torch
    from transformers import AutoModelForCausalLM
    N = cfg.num_hidden_layers
    big_cfg = copy.deepcopy(cfg)
    big_cfg.num_hidden_layers = N + 1
    big_cfg.num_nextn_predict_layers = 0
    big = AutoModelForCausalLM.from_config(big_cfg)
    sd = {k: v for k, v in model.state_dict().items()}
    for k, v in mtp.block.state_dict().items():
        sd["model.layers.%d.%s" % (N, k)] = v
    missing, unexpected = big.load_state_dict(sd, strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError("the N+1-layer model does not take the weights: missing %s, unexpected %s"
                           % (missing[:6], unexpected[:6]))
    big.tie_weights()
    tmp = tempfile.mkdtemp(prefix="glm_mtp_")
    try:
        mr.save_checkpoint("glm4_moe", big_cfg, big.eval(), tmp, [[1, 2, 3]])
        saved, _ = mr.load_saved_tensors(tmp)
    finally:
        shutil.rmtree(tmp)
    p = "model.layers.%d." % N
    out = {k: v for k, v in saved.items() if k.startswith(p)}
    out[p + "eh_proj.weight"] = mtp.eh_proj.weight.detach()
    out[p + "enorm.weight"] = mtp.enorm.weight.detach()
    out[p + "hnorm.weight"] = mtp.hnorm.weight.detach()
    out[p + "shared_head.norm.weight"] = mtp.head_norm.weight.detach()
    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in out.items()}


def acceptance(model, mtp, ids, n):
    """Greedy continuation of ids for n tokens, and how many of its tokens
    after the first the MTP layer drafted from the state before."""
    import torch
    seq = list(ids)
    hit = tried = 0
    with torch.no_grad():
        for _ in range(n):
            x = torch.tensor([seq])
            h = model.model(input_ids=x, use_cache=False).last_hidden_state
            t = int(torch.argmax(model.lm_head(h[0, -1]).float()))
            if len(seq) > len(ids):
                # the draft of t was made from the state before the last token, paired with it
                d = mtp(h[:, :-1], x[:, 1:], model)[0, -1]
                tried += 1
                hit += int(torch.argmax(d.float())) == t
            seq.append(t)
    return seq[len(ids):], hit, tried


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="training text, UTF-8 (README: bible -l0 ...)")
    ap.add_argument("--out", required=True, help="checkpoint directory to write (replaced if it exists)")
    ap.add_argument("--minutes", type=float, help="wall-clock training time limit (default: 4 when --steps is not given)")
    ap.add_argument("--steps", type=int, help="optimizer steps to train; the learning-rate schedule follows them")
    ap.add_argument("--batch", type=int, default=64, help="sequences per step (default 64)")
    ap.add_argument("--ctx", type=int, default=256, help="tokens per sequence (default 256)")
    ap.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate, cosine-decayed to a tenth (default 2e-3)")
    ap.add_argument("--mtp-weight", type=float, default=0.3, help="weight of the MTP layer's loss (default 0.3)")
    ap.add_argument("--seed", type=int, default=1234, help="seed of initialisation and batch sampling (default 1234)")
    args = ap.parse_args()
    if args.steps is None and args.minutes is None:
        args.minutes = 4.0

    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer
    from transformers import GenerationConfig
    mr = load_module("make_reference", "make-reference.py")
    td = load_module("train_demo", "train-demo.py")
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print("torch %s, transformers %s, device %s%s" % (
        torch.__version__, transformers.__version__, device,
        " (%s)" % torch.cuda.get_device_name(0) if device == "cuda" else ""))
    torch.backends.cuda.matmul.allow_tf32 = True
    print("arguments:", " ".join("--%s %s" % (k.replace("_", "-"), v)
                                   for k, v in sorted(vars(args).items()) if v is not None))
    lines = mr.read_corpus_lines(args.corpus)
    t = time.time()
    tok = mr.build_tokenizer("qwen", lines, td.TOK_VOCAB)
    eot = tok.token_to_id("<|endoftext|>")
    V = tok.get_vocab_size(with_added_tokens=True)
    ids = td.tokenize_corpus(tok, lines)
    print("tokenizer: vocab %d, corpus %d tokens, %.1fs" % (V, len(ids), time.time() - t))
    cfg = make_config(V, eot)
    model, mtp = build_model(cfg, "sdpa")
    model.to(device)
    mtp.to(device)
    nm = sum(p.numel() for p in model.parameters())
    nt = sum(p.numel() for p in mtp.parameters())
    print("model: %d parameters, MTP layer %d more (%.2f MB in bf16)" % (nm, nt, (nm + nt) * 2 / 1e6))
    data = torch.tensor(ids, dtype=torch.long, device=device)
    train(model, mtp, data, args, device)

    model = model.float().cpu().eval()
    mtp = mtp.float().cpu().eval()
    mr.round_params_bf16(model)
    mr.round_params_bf16(mtp)
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    verify = [tok.encode(PROMPT, add_special_tokens=False).ids,
              tok.encode("And God said, Let there be light: and there was light.").ids]
    ref = mr.save_checkpoint("glm4_moe", cfg, model, args.out, verify)
    extra = published_mtp(mr, cfg, model, mtp)
    st = os.path.join(args.out, "model.safetensors")
    tensors = load_file(st)
    clash = sorted(set(tensors) & set(extra))
    if clash:
        raise RuntimeError("MTP tensors already in the checkpoint: %s" % clash[:6])
    tensors.update(extra)
    save_file(tensors, st, metadata={"format": "pt"})
    print("MTP layer: %d tensors appended under model.layers.%d" % (len(extra), cfg.num_hidden_layers))
    mr.save_tokenizer_files(tok, args.out, bos="<|endoftext|>", eos="<|endoftext|>", unk=None, pad="<|endoftext|>")
    GenerationConfig(bos_token_id=eot, eos_token_id=eot).save_pretrained(args.out)
    keep = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}
    for fn in sorted(os.listdir(args.out)):
        if fn not in keep:
            print("removing unexpected file", fn)
            p = os.path.join(args.out, fn)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    total = 0
    for fn in sorted(os.listdir(args.out)):
        sz = os.path.getsize(os.path.join(args.out, fn))
        total += sz
        print("  %-28s %9d bytes" % (fn, sz))
    print("demo-glm: %d parameters, %d bytes in total" % (nm + nt, total))

    # the saved weights, float32: the continuation and the MTP layer's drafts along it
    saved = {k: v.float() for k, v in load_file(st).items()}
    p = "model.layers.%d." % cfg.num_hidden_layers
    mtp.eh_proj.weight.data.copy_(saved[p + "eh_proj.weight"])
    mtp.enorm.weight.data.copy_(saved[p + "enorm.weight"])
    mtp.hnorm.weight.data.copy_(saved[p + "hnorm.weight"])
    mtp.head_norm.weight.data.copy_(saved[p + "shared_head.norm.weight"])
    tok2 = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    pids = tok2.encode(PROMPT, add_special_tokens=False).ids
    g, hit, tried = acceptance(ref, mtp, pids, 60)
    print("prompt %r -> ids %s" % (PROMPT, pids))
    print("greedy ids:", " ".join(map(str, g)))
    print("GREEDY: %r" % (PROMPT + tok2.decode(g, skip_special_tokens=False)))
    print("MTP drafts along it: %d of %d are the next greedy token (%.1f%%)" % (hit, tried, 100.0 * hit / max(tried, 1)))
    print("done")


if __name__ == "__main__":
    main()
