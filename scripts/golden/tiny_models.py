"""The tiny Qwen3 / Qwen3-MoE models behind qtune's goldens, and how to run them in transformers.

Weights are drawn with numpy's PCG64 from fixed seeds (not torch's initializers) so the committed
checkpoints do not depend on the torch version. The "canonical" state dict uses the on-disk Hugging
Face names (per-expert tensors for MoE), float32 numpy arrays.
"""
import numpy as np

F32 = np.float32

# Sizes are deliberately odd: GQA, head_dim != hidden/n_heads, every in-feature K a multiple of 32,
# every out-feature a multiple of 8. dense and moe-nonorm have hidden 96 (qwen3.c Q8_0 group 32);
# dense-tied and moe-norm have hidden 128 (group 64), so both Q8_0 group sizes are exercised.
# Seeds were picked (once, by hand, from 20 candidates each) for clear top-1 margins and router gaps.
SPECS = {
    "dense": dict(
        arch="Qwen3ForCausalLM", seed=221, hidden_size=96, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=40, vocab_size=384,
        max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False),
    "dense-tied": dict(
        arch="Qwen3ForCausalLM", seed=362, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, head_dim=32, vocab_size=320,
        max_position_embeddings=128, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True),
    "moe-norm": dict(
        arch="Qwen3MoeForCausalLM", seed=163, hidden_size=128, intermediate_size=256,
        moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, head_dim=48, vocab_size=384,
        max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False),
    "moe-nonorm": dict(
        arch="Qwen3MoeForCausalLM", seed=424, hidden_size=96, intermediate_size=256,
        moe_intermediate_size=64, num_experts=8, num_experts_per_tok=3, norm_topk_prob=False,
        num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3, head_dim=32, vocab_size=384,
        max_position_embeddings=128, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False),
}


def is_moe(spec):
    return spec["arch"] == "Qwen3MoeForCausalLM"


def config_json(spec):
    """config.json in the style of the official Qwen3 / Qwen3-MoE checkpoints (top-level rope_theta),
    which both transformers v4 and v5 read."""
    c = {
        "architectures": [spec["arch"]],
        "model_type": "qwen3_moe" if is_moe(spec) else "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "head_dim": spec["head_dim"],
        "hidden_act": "silu",
        "hidden_size": spec["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": spec["intermediate_size"],
        "max_position_embeddings": spec["max_position_embeddings"],
        "max_window_layers": spec["num_hidden_layers"],
        "num_attention_heads": spec["num_attention_heads"],
        "num_hidden_layers": spec["num_hidden_layers"],
        "num_key_value_heads": spec["num_key_value_heads"],
        "rms_norm_eps": spec["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": spec["rope_theta"],
        "sliding_window": None,
        "tie_word_embeddings": spec["tie_word_embeddings"],
        "torch_dtype": "float32",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": spec["vocab_size"],
    }
    if is_moe(spec):
        c.update({
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "moe_intermediate_size": spec["moe_intermediate_size"],
            "norm_topk_prob": spec["norm_topk_prob"],
            "num_experts": spec["num_experts"],
            "num_experts_per_tok": spec["num_experts_per_tok"],
            "output_router_logits": False,
            "router_aux_loss_coef": 0.001,
        })
    return c


def dims(spec):
    d = spec["hidden_size"]
    return dict(dim=d, q_dim=spec["num_attention_heads"] * spec["head_dim"],
                kv_dim=spec["num_key_value_heads"] * spec["head_dim"])


def linear_names(spec, layer):
    """(hf_name, N, K) of every matrix of one layer, in a fixed order."""
    dm = dims(spec)
    d, qd, kvd = dm["dim"], dm["q_dim"], dm["kv_dim"]
    p = f"model.layers.{layer}"
    out = [(f"{p}.self_attn.q_proj.weight", qd, d), (f"{p}.self_attn.k_proj.weight", kvd, d),
           (f"{p}.self_attn.v_proj.weight", kvd, d), (f"{p}.self_attn.o_proj.weight", d, qd)]
    if is_moe(spec):
        h = spec["moe_intermediate_size"]
        out.append((f"{p}.mlp.gate.weight", spec["num_experts"], d))
        for e in range(spec["num_experts"]):
            q = f"{p}.mlp.experts.{e}"
            out += [(f"{q}.gate_proj.weight", h, d), (f"{q}.up_proj.weight", h, d),
                    (f"{q}.down_proj.weight", d, h)]
    else:
        h = spec["intermediate_size"]
        out += [(f"{p}.mlp.gate_proj.weight", h, d), (f"{p}.mlp.up_proj.weight", h, d),
                (f"{p}.mlp.down_proj.weight", d, h)]
    return out


def make_weights(spec):
    """Deterministic float32 weights, keyed by Hugging Face name. Scales are chosen so activations stay
    O(1) through the layers and logits spread over a few units (clear top-1 tokens)."""
    rng = np.random.Generator(np.random.PCG64(spec["seed"]))
    d, hd, v = spec["hidden_size"], spec["head_dim"], spec["vocab_size"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(F32)

    def norm_weight(n):
        # Not all ones, so a runtime that skips or misplaces a norm weight is caught.
        return rng.uniform(0.6, 1.4, size=n).astype(F32)

    # A tied model's embedding is also its classifier: keep it at classifier scale so logits are not
    # dominated by each token's similarity with itself.
    w = {"model.embed_tokens.weight": normal((v, d), 2.5 / np.sqrt(d) if spec["tie_word_embeddings"] else 1.0)}
    for layer in range(spec["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        w[f"{p}.input_layernorm.weight"] = norm_weight(d)
        w[f"{p}.post_attention_layernorm.weight"] = norm_weight(d)
        w[f"{p}.self_attn.q_norm.weight"] = norm_weight(hd)
        w[f"{p}.self_attn.k_norm.weight"] = norm_weight(hd)
        for name, n, k in linear_names(spec, layer):
            gain = 2.0 if name.endswith("mlp.gate.weight") else 1.0  # distinct router probabilities
            w[name] = normal((n, k), gain / np.sqrt(k))
    w["model.norm.weight"] = norm_weight(d)
    if not spec["tie_word_embeddings"]:
        w["lm_head.weight"] = normal((v, d), 2.5 / np.sqrt(d))
    return w


def make_sequences(spec, seed=7):
    """Three fixed token sequences of 7, 13 and 24 ids; they contain id 0, id vocab-1 and repeats."""
    v = spec["vocab_size"]
    rng = np.random.Generator(np.random.PCG64(seed))
    s0 = [0] + [int(x) for x in rng.integers(1, v - 1, 5)] + [v - 1]
    s1 = [int(x) for x in rng.integers(0, v, 13)]
    s1[6] = v - 1
    s2 = [int(x) for x in rng.integers(0, v, 12)]
    s2 = s2 + s2[:6] + [0, 0, v - 1, v - 1] + s2[6:8]
    assert len(s0) == 7 and len(s1) == 13 and len(s2) == 24
    return [s0, s1, s2]


# ------------------------------------------------------------------------------------ transformers
def build_hf_model(spec):
    import torch
    import transformers
    cfg = config_json(spec)
    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "torch_dtype")}
    if is_moe(spec):
        config = transformers.Qwen3MoeConfig(**kwargs)
        cls = transformers.Qwen3MoeForCausalLM
    else:
        config = transformers.Qwen3Config(**kwargs)
        cls = transformers.Qwen3ForCausalLM
    config._attn_implementation = "eager"
    if is_moe(spec):
        # The plain per-expert loop (qwen3-math.md section 5), not transformers v5's grouped_mm default.
        config._experts_implementation = "eager"
    torch.manual_seed(0)
    model = cls(config).to(torch.float32).eval()
    return model


def load_weights(model, spec, weights):
    """Copy a canonical (per-expert) state dict into the model, whatever layout this transformers
    version uses for experts (v4: one module per expert; v5: fused gate_up_proj / down_proj)."""
    import torch
    params = dict(model.named_parameters(remove_duplicate=False))
    done = set()

    def put(name, arr):
        t = params[name]
        a = torch.from_numpy(np.ascontiguousarray(arr, dtype=F32))
        if tuple(t.shape) != tuple(a.shape):
            raise ValueError(f"{name}: model {tuple(t.shape)} vs weights {tuple(a.shape)}")
        with torch.no_grad():
            t.copy_(a)
        done.add(name)

    fused = any(".mlp.experts.gate_up_proj" in n for n in params)
    for name, arr in weights.items():
        if fused and ".mlp.experts." in name:
            continue
        if name.endswith("mlp.gate.weight") and name not in params:
            raise ValueError(f"router parameter {name} not found")
        put(name, arr)
    if spec["tie_word_embeddings"]:
        if "lm_head.weight" in params:
            put("lm_head.weight", weights["model.embed_tokens.weight"])
    if fused:
        e_n, h = spec["num_experts"], spec["moe_intermediate_size"]
        for layer in range(spec["num_hidden_layers"]):
            p = f"model.layers.{layer}.mlp.experts"
            gate_up = np.stack([np.concatenate([weights[f"{p}.{e}.gate_proj.weight"],
                                                weights[f"{p}.{e}.up_proj.weight"]], axis=0)
                                for e in range(e_n)])
            down = np.stack([weights[f"{p}.{e}.down_proj.weight"] for e in range(e_n)])
            assert gate_up.shape[1] == 2 * h
            put(f"{p}.gate_up_proj", gate_up)
            put(f"{p}.down_proj", down)
    missing = set(params) - done
    if missing:
        raise ValueError(f"parameters not set: {sorted(missing)}")
    if spec["tie_word_embeddings"] and model.lm_head.weight.data_ptr() != \
            model.model.embed_tokens.weight.data_ptr():
        if not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight):
            raise ValueError("tied lm_head differs from embed_tokens")


def logits_for(model, ids):
    import torch
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float32).numpy().astype(F32)


def router_margins(model, spec, ids):
    """Smallest gap, over all tokens and layers, between the k-th and (k+1)-th router logit: a tiny gap
    would make the expert choice fragile under rounding (softmax is monotonic, so logits decide)."""
    import torch
    gaps = []
    hooks = []

    def hook(_mod, inp, _out):
        x = inp[0].reshape(-1, spec["hidden_size"])
        logits = torch.nn.functional.linear(x, _mod.weight)
        top = torch.topk(logits.to(torch.float32), spec["num_experts_per_tok"] + 1, dim=-1).values
        gaps.append(float((top[:, -2] - top[:, -1]).min()))

    for layer in model.model.layers:
        hooks.append(layer.mlp.gate.register_forward_hook(hook))
    try:
        logits_for(model, ids)
    finally:
        for h in hooks:
            h.remove()
    return min(gaps)
