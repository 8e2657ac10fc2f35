#!/usr/bin/env python3
"""Train the small Qwen3-MoE demo model shipped with libcolibri.

Usage: python3 tools/train-demo.py --corpus corpus/kjv.txt --out DIR
           [--minutes M] [--steps N] [--seed S] ...

Trains a byte-level BPE tokenizer (Qwen2 style) and a small
Qwen3MoeForCausalLM on the corpus (on a GPU when there is one, bf16
autocast), for M minutes of wall-clock time (4 by default) or for N steps,
whichever comes first when both are given; the learning-rate schedule
follows the steps when N is given, else the clock. Then rounds the weights to
bfloat16 and writes DIR/config.json, model.safetensors (bf16, per-expert
tensor names), tokenizer.json, tokenizer_config.json and
generation_config.json, and prints greedy and sampled continuations of
"In the beginning" computed in float32 from the saved weights.

Needs torch, transformers (5.x), tokenizers and safetensors. Tokenizer and
checkpoint helpers come from tools/make-reference.py.
"""

import argparse
import importlib.util
import math
import os
import shutil
import sys
import time


def load_helpers():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("make_reference", os.path.join(here, "make-reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODEL = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, num_experts=8, num_experts_per_tok=2,
             moe_intermediate_size=128, mlp_only_layers=[], decoder_sparse_step=1, norm_topk_prob=True,
             tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=512,
             hidden_act="silu", attention_bias=False, use_sliding_window=False,
             initializer_range=0.02, router_aux_loss_coef=0.01)
ROPE_THETA = 10000.0
TOK_VOCAB = 3069  # + 3 special tokens = 3072
PROMPT = "In the beginning"


def make_config(V, eot):
    from transformers import AutoConfig
    fields = dict(MODEL, vocab_size=V, bos_token_id=eot, eos_token_id=eot)
    try:
        return AutoConfig.for_model("qwen3_moe", rope_parameters={"rope_type": "default",
                                                                   "rope_theta": ROPE_THETA}, **fields)
    except Exception as ex:
        print("rope_parameters not accepted (%s); using rope_theta" % ex)
        return AutoConfig.for_model("qwen3_moe", rope_theta=ROPE_THETA, **fields)


def build_model(cfg, attn):
    from transformers import AutoModelForCausalLM
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)
    except TypeError:
        model = AutoModelForCausalLM.from_config(cfg)
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        print("NOTE: tying lm_head to embed_tokens by hand")
        model.get_output_embeddings().weight = model.get_input_embeddings().weight
    return model


def tokenize_corpus(tok, lines, chunk=200):
    texts = ["".join(lines[i:i + chunk]) for i in range(0, len(lines), chunk)]
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
    return ids


def train(model, data, args, device):
    import torch
    import torch.nn.functional as F
    n = data.numel()
    n_val = max(n // 100, args.ctx * 8 + 1)
    train_data, val_data = data[:-n_val], data[-n_val:]
    T, B = args.ctx, args.batch
    offs = torch.arange(T + 1, device=device)
    gen = torch.Generator(device=device).manual_seed(args.seed)

    def batch(src, g=gen):
        i = torch.randint(0, src.numel() - T - 1, (B,), device=device, generator=g)
        x = src[i[:, None] + offs]
        return x[:, :-1], x[:, 1:]

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, fused=(device == "cuda"), **opt_kw)
    except Exception:
        opt = torch.optim.AdamW(groups, **opt_kw)
    V = model.config.vocab_size
    use_aux = True
    amp = dict(device_type="cuda", dtype=torch.bfloat16) if device == "cuda" else dict(device_type="cpu", enabled=False)
    budget = args.minutes * 60.0 if args.minutes is not None else None
    warmup = 200
    t0 = time.time()
    step, hist = 0, []
    model.train()
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
            aux = None
            if use_aux:
                try:
                    out = model(input_ids=x, output_router_logits=True, use_cache=False)
                    aux = getattr(out, "aux_loss", None)
                except Exception as ex:
                    print("router aux loss unavailable (%s); training without it" % ex)
                    use_aux = False
            if not use_aux:
                out = model(input_ids=x, use_cache=False)
            loss = F.cross_entropy(out.logits.float().reshape(-1, V), y.reshape(-1))
        total = loss + (model.config.router_aux_loss_coef * aux if aux is not None else 0.0)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        hist.append(loss.detach())
        step += 1
        if step % 100 == 0 or step == 1:
            l = torch.stack(hist).mean().item()
            hist = []
            el = time.time() - t0
            print("step %5d  %6.1fs  loss %.4f  aux %s  lr %.2e  %.0f tok/s"
                  % (step, el, l, "%.4f" % float(aux.detach()) if aux is not None else "-", lr,
                     step * B * T / max(el, 1e-9)), flush=True)
    el = time.time() - t0
    print("trained %d steps in %.1fs (%.0f tokens, %.2f epochs of %d training tokens)"
          % (step, el, step * B * T, step * B * T / train_data.numel(), train_data.numel()))
    model.eval()
    vg = torch.Generator(device=device).manual_seed(12345)
    tg = torch.Generator(device=device).manual_seed(54321)
    with torch.no_grad(), torch.autocast(**amp):
        vl = [F.cross_entropy(model(input_ids=x, use_cache=False).logits.float().reshape(-1, V),
                              y.reshape(-1)).item() for x, y in (batch(val_data, vg) for _ in range(16))]
        tl = [F.cross_entropy(model(input_ids=x, use_cache=False).logits.float().reshape(-1, V),
                              y.reshape(-1)).item() for x, y in (batch(train_data, tg) for _ in range(16))]
    print("final loss: train %.4f  held-out (last 1%% of corpus) %.4f" % (sum(tl) / len(tl), sum(vl) / len(vl)))


def generate(model, ids, n, temperature=None, seed=0):
    import torch
    g = torch.Generator().manual_seed(seed)
    seq = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].float()
            if temperature is None:
                t = int(torch.argmax(logits))
            else:
                p = torch.softmax(logits / temperature, dim=-1)
                t = int(torch.multinomial(p, 1, generator=g))
            out.append(t)
            seq.append(t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="training text, UTF-8 (README: bible -l0 ...)")
    ap.add_argument("--out", required=True, help="checkpoint directory to write (replaced if it exists)")
    ap.add_argument("--minutes", type=float,
                    help="wall-clock training time limit (default: 4 when --steps is not given)")
    ap.add_argument("--steps", type=int,
                    help="optimizer steps to train; the learning-rate schedule follows them")
    ap.add_argument("--batch", type=int, default=64, help="sequences per step (default 64)")
    ap.add_argument("--ctx", type=int, default=256, help="tokens per sequence (default 256)")
    ap.add_argument("--lr", type=float, default=2e-3,
                    help="peak AdamW learning rate, cosine-decayed to a tenth (default 2e-3)")
    ap.add_argument("--seed", type=int, default=1234,
                    help="seed of model initialisation and batch sampling (default 1234)")
    ap.add_argument("--save-raw", help="also save the trained bf16 state (torch.save) to this path")
    ap.add_argument("--from-raw", help="skip training: load a state saved with --save-raw")
    args = ap.parse_args()
    if args.steps is None and args.minutes is None:
        args.minutes = 4.0
    if args.steps is not None and args.steps < 1:
        ap.error("--steps must be at least 1")
    if args.minutes is not None and not args.minutes > 0:
        ap.error("--minutes must be positive")

    import torch
    import transformers
    from tokenizers import Tokenizer
    from transformers import GenerationConfig
    mr = load_helpers()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print("torch %s, transformers %s, device %s%s" % (
        torch.__version__, transformers.__version__, device,
        " (%s)" % torch.cuda.get_device_name(0) if device == "cuda" else ""))
    torch.backends.cuda.matmul.allow_tf32 = True

    print("arguments:", " ".join("--%s %s" % (k.replace("_", "-"), v)
                                   for k, v in sorted(vars(args).items()) if v is not None))
    lines = mr.read_corpus_lines(args.corpus)
    if args.from_raw:
        raw = torch.load(args.from_raw, map_location="cpu")
        tok = Tokenizer.from_str(raw["tokenizer"])
        eot = tok.token_to_id("<|endoftext|>")
        cfg = make_config(tok.get_vocab_size(with_added_tokens=True), eot)
        model = build_model(cfg, "sdpa")
        model.load_state_dict({k: v.float() for k, v in raw["state_dict"].items()}, strict=False)
        model.tie_weights()
    else:
        t = time.time()
        tok = mr.build_tokenizer("qwen", lines, TOK_VOCAB)
        eot = tok.token_to_id("<|endoftext|>")
        V = tok.get_vocab_size(with_added_tokens=True)
        ids = tokenize_corpus(tok, lines)
        print("tokenizer: vocab %d, corpus %d tokens (%.2f bytes/token), %.1fs"
              % (V, len(ids), os.path.getsize(args.corpus) / len(ids), time.time() - t))
        cfg = make_config(V, eot)
        model = build_model(cfg, "sdpa").to(device)
        nparam = sum(p.numel() for p in model.parameters())
        print("model: %d parameters (%.2f MB in bf16)" % (nparam, nparam * 2 / 1e6))
        data = torch.tensor(ids, dtype=torch.long, device=device)
        train(model, data, args, device)
        if args.save_raw:
            torch.save({"state_dict": {k: v.detach().to(torch.bfloat16).cpu() for k, v in model.state_dict().items()},
                        "tokenizer": tok.to_str()}, args.save_raw)
            print("raw state saved to", args.save_raw)

    model = model.float().cpu().eval()
    mr.round_params_bf16(model)
    nparam = sum(p.numel() for p in model.parameters())
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    verify = [tok.encode(PROMPT, add_special_tokens=False).ids,
              tok.encode("And God said, Let there be light: and there was light.").ids]
    ref = mr.save_checkpoint("qwen3_moe", cfg, model, args.out, verify)
    mr.save_tokenizer_files(tok, args.out, bos="<|endoftext|>", eos="<|endoftext|>", unk=None,
                            pad="<|endoftext|>")
    GenerationConfig(bos_token_id=eot, eos_token_id=eot).save_pretrained(args.out)
    keep = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json"}
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
    print("demo: %d parameters, %d bytes in total" % (nparam, total))
    if os.path.getsize(os.path.join(args.out, "model.safetensors")) >= 10_000_000:
        print("WARNING: model.safetensors is 10 MB or more")

    tok2 = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    pids = tok2.encode(PROMPT, add_special_tokens=False).ids
    print("prompt %r -> ids %s" % (PROMPT, pids))
    g = generate(ref, pids, 60)
    print("greedy ids:", " ".join(map(str, g)))
    print("GREEDY: %r" % (PROMPT + tok2.decode(g, skip_special_tokens=False)))
    s = generate(ref, pids, 60, temperature=0.8, seed=7)
    print("sampled ids (T=0.8, torch seed 7):", " ".join(map(str, s)))
    print("SAMPLED: %r" % (PROMPT + tok2.decode(s, skip_special_tokens=False)))
    print("done")


if __name__ == "__main__":
    main()
