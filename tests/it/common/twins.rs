//! Synthetic "twins" of each decoder family: tiny GGUF files with the family's real metadata keys and tensor layout
//! (as llama.cpp's convert_hf_to_gguf.py writes them and its src/models/*.cpp read them) and random weights, for
//! checking our forward pass against llama.cpp and candle-transformers (tests/it/families.rs).
//!
//! What each family's file holds (`{a}` = `general.architecture`; every family also has `{a}.block_count`,
//! `context_length`, `embedding_length`, `feed_forward_length`, `attention.head_count`, `attention.head_count_kv`,
//! `attention.layer_norm_rms_epsilon`, `rope.freq_base`, and the tensors `token_embd.weight`, `output_norm.weight`,
//! `blk.N.attn_norm.weight`, `blk.N.attn_output.weight`, `blk.N.ffn_norm.weight`, `blk.N.ffn_down.weight`):
//!
//! | twin       | extra keys                                          | extra tensors                           | RoPE | output |
//! |------------|-----------------------------------------------------|-----------------------------------------|------|--------|
//! | llama3     | vocab_size, rope.dimension_count                    | attn_q/k/v, ffn_gate/up, `rope_freqs.weight` [rot/2] (llama3 factors: divisors of each pair's frequency) | norm | own `output.weight` |
//! | llama      | vocab_size, rope.dimension_count; SentencePiece vocab | attn_q/k/v, ffn_gate/up               | norm | tied   |
//! | qwen2      | —                                                   | attn_q/k/v + `.bias`, ffn_gate/up       | neox | own    |
//! | qwen3      | attention.key_length/value_length (64 ≠ 256/8)     | attn_q/k/v, `attn_q_norm`/`attn_k_norm` [head_dim], ffn_gate/up | neox | own |
//! | phi3       | rope.dimension_count, rope.scaling.original_context_length, attention.sliding_window (2047, which llama.cpp ignores for phi3); SentencePiece vocab | fused `attn_qkv` [q+k+v rows], fused `ffn_up` [2·ffn rows: gate then up] | neox | own |
//! | phi4mini   | as phi3 + rope.scaling.attn_factor; rope.dimension_count 48 of 64 (partial rotary); sliding_window 0 | as phi3 + `rope_factors_long/short.weight` [rot/2] (LongRoPE divisors: long when the context exceeds original_context_length) | neox | tied |
//! | gemma3     | attention.key_length/value_length (64 ≠ 256/8), attention.sliding_window; SentencePiece vocab | attn_q/k/v, attn_q_norm/attn_k_norm, `post_attention_norm`, `post_ffw_norm`, ffn_gate/up (GELU) | neox | tied |
//! | smollm3    | vocab_size, rope.dimension_count                    | attn_q/k/v, ffn_gate/up                 | norm, none on every 4th layer | tied |
//!
//! Rules that are not in the file but in llama.cpp's code (src/models/*.cpp, src/llama-hparams.cpp):
//! - gemma3: the embedding is multiplied by √hidden; norm weights are stored with Gemma's `1 +` already added; layer
//!   `il` slides (window `attention.sliding_window`, a key at distance ≥ window is masked) unless `il % 6 == 5`
//!   (`attention.sliding_window_pattern` absent); sliding layers use RoPE base 10000 (`rope.freq_base_swa` absent),
//!   full ones `rope.freq_base`; Q is scaled by 1/√key_length; FFN is GELU(gate)·up.
//! - smollm3: no RoPE on layer `il` when `(il + 1) % 4 == 0` (`n_no_rope_layer_step = 4`, no key).
//! - phi3: LongRoPE factors are picked by context size (n_ctx > original_context_length: long), not by position;
//!   `rope.scaling.attn_factor` multiplies cos and sin of the rotated dimensions; fused `ffn_up` is SwiGLU(first
//!   half)·second half; Q is scaled by 1/√head_dim.
//! - llama, smollm3: rotary pairs are interleaved (2i, 2i+1) (LLAMA_ROPE_TYPE_NORM); qwen2, qwen3, phi3, gemma3
//!   pair i with i + rot/2 (NEOX).
//!
//! Greedy decoding on random weights has no margins to speak of, so the files are shaped for clear ones: the
//! residual stream carries the input token's embedding and the layers add a comparable part, so an untied output
//! whose row `next(t)` is token `t`'s embedding makes `next(t)` win by a wide margin, and a tied one makes `t`
//! itself win; the layers still move every logit by tens of percent, which is what the logit comparison checks.
#![allow(dead_code)]

use std::path::Path;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::tiny::{random, tiny_vocab};

/// The decoder families, each modelled on a real model of its architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Llama 3.x: llama3 RoPE factors in `rope_freqs.weight`, GQA, untied output, GPT-2 BPE (`llama-bpe`).
    Llama3,
    /// Llama 2 / TinyLlama / Mistral: no `rope_freqs`, tied output, SentencePiece vocabulary.
    Llama,
    /// Qwen2.5: biases on q, k, v.
    Qwen2,
    /// Qwen3: RMS norm on q and k per head, head_dim ≠ hidden / heads.
    Qwen3,
    /// Phi-3-mini-4k: fused qkv and gate|up, full rotary at base 10000, no LongRoPE factors.
    Phi3,
    /// Phi-4-mini: as Phi-3 with partial rotary (48 of 64) and LongRoPE factors, tied output, `gpt-4o` BPE.
    Phi4Mini,
    /// Gemma 3: pre/post norms, q/k norms, GELU, sliding-window layers with their own RoPE base, √hidden scale.
    Gemma3,
    /// SmolLM3: llama layout, no RoPE on every fourth layer, tied output.
    SmolLm3,
}

/// Weight types: Q8_0 everywhere, or the K-quant mix of a Q4_K_M file (Q4_K matrices, Q6_K for ffn_down, the
/// output and the embedding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    Q8_0,
    KQuant,
}

/// Widths shared by every twin: multiples of 256 so that K-quant blocks fit every row.
pub const HIDDEN: usize = 256;
pub const FFN: usize = 512;
pub const HEAD_DIM: usize = 64;
/// The context every twin declares (`context_length`); llama.cpp's context is made this size too.
pub const CONTEXT: usize = 1024;
/// Gemma 3 twin's window: shorter than the test's 64-token prompt, so sliding layers really slide.
pub const GEMMA_WINDOW: usize = 32;
/// Phi-4-mini twin's `rope.scaling.original_context_length`: below CONTEXT, so the long factors apply, and below
/// the test's 96 positions, so a third of them lie past it.
pub const PHI_ORIGINAL_CONTEXT: usize = 32;

/// Where greedy decoding of an untied twin goes after token `t` (a permutation: 5 is prime to both vocab sizes).
pub fn next_token(t: usize, vocab: usize) -> usize {
    (5 * t + 1) % vocab
}

impl Family {
    pub const ALL: [Family; 8] = [
        Family::Llama3,
        Family::Llama,
        Family::Qwen2,
        Family::Qwen3,
        Family::Phi3,
        Family::Phi4Mini,
        Family::Gemma3,
        Family::SmolLm3,
    ];

    pub fn architecture(self) -> &'static str {
        match self {
            Family::Llama3 | Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Phi3 | Family::Phi4Mini => "phi3",
            Family::Gemma3 => "gemma3",
            Family::SmolLm3 => "smollm3",
        }
    }

    pub fn n_layer(self) -> usize {
        match self {
            // Layers 0-4 slide, layer 5 is full.
            Family::Gemma3 => 6,
            // Layer 3 has no RoPE.
            Family::SmolLm3 => 4,
            _ => 2,
        }
    }

    /// (heads, kv heads).
    fn heads(self) -> (usize, usize) {
        match self {
            // head_dim 64 with hidden / heads = 32: key_length is what sizes q and k.
            Family::Qwen3 | Family::Gemma3 => (8, 2),
            // Multi-head attention, as Llama 2 7B and Phi-3-mini.
            Family::Llama | Family::Phi3 => (4, 4),
            _ => (4, 2),
        }
    }

    fn rope_dims(self) -> usize {
        if self == Family::Phi4Mini {
            HEAD_DIM * 3 / 4
        } else {
            HEAD_DIM
        }
    }

    pub fn tied(self) -> bool {
        matches!(self, Family::Llama | Family::Phi4Mini | Family::Gemma3 | Family::SmolLm3)
    }

    fn sentencepiece(self) -> bool {
        matches!(self, Family::Llama | Family::Phi3 | Family::Gemma3)
    }

    /// `tokenizer.ggml.pre` for the GPT-2 BPE twins: the names llama.cpp's llama-vocab.cpp knows these families by.
    fn pre_tokenizer(self) -> &'static str {
        match self {
            Family::Llama3 | Family::SmolLm3 => "llama-bpe",
            Family::Qwen2 | Family::Qwen3 => "qwen2",
            Family::Phi4Mini => "gpt-4o",
            _ => "default",
        }
    }

    fn rope_base(self) -> f32 {
        match self {
            Family::Llama3 => 500_000.0,
            Family::Qwen2 | Family::Qwen3 | Family::Gemma3 => 1_000_000.0,
            Family::SmolLm3 => 2_000_000.0,
            _ => 10_000.0,
        }
    }
}

/// The vocabulary of the twin: tokens, types, and (BPE) merges or (SentencePiece) scores.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
    scores: Vec<f32>,
    bos: u32,
    eos: u32,
    unk: Option<u32>,
}

/// A SentencePiece vocabulary: control tokens first (Gemma's `<pad> <eos> <bos> <unk>`, or Llama 2's and
/// Phi-3's `<unk> <s> </s>`), the 256 byte-fallback tokens, a few pieces (scores give the merge order), then chat
/// markers. llama.cpp looks Phi-3's `<unk> <s> </s> <|endoftext|>` up by text when the model's name says phi3.
fn sentencepiece_vocab(family: Family) -> Vocab {
    let gemma = family == Family::Gemma3;
    let (mut tokens, mut types): (Vec<String>, Vec<i32>) = if gemma {
        (["<pad>", "<eos>", "<bos>", "<unk>"].map(String::from).to_vec(), vec![3, 3, 3, 2])
    } else {
        (["<unk>", "<s>", "</s>"].map(String::from).to_vec(), vec![2, 3, 3])
    };
    let mut scores = vec![0.0f32; tokens.len()];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (i, piece) in ["▁", "t", "h", "▁t", "th", "▁th"].iter().enumerate() {
        tokens.push(piece.to_string());
        types.push(1);
        scores.push(-(i as f32));
    }
    let markers: &[&str] = if gemma {
        &["<start_of_turn>", "<end_of_turn>"]
    } else {
        &["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"]
    };
    for special in markers {
        tokens.push(special.to_string());
        types.push(3);
        scores.push(0.0);
    }
    let (bos, eos, unk) = if gemma { (2, 1, 3) } else { (1, 2, 0) };
    Vocab { tokens, types, merges: Vec::new(), scores, bos, eos, unk: Some(unk) }
}

fn bpe_vocab() -> Vocab {
    let (tokens, types, merges) = tiny_vocab();
    let n = tokens.len() as u32;
    Vocab { tokens, types, merges, scores: Vec::new(), bos: n - 3, eos: n - 1, unk: None }
}

/// llama3 RoPE factors as convert_hf_to_gguf.py computes them (conversion/llama.py), with a twin-sized original
/// context of 64 (Llama 3.2: 8192) so that the factors move pairs that turn within a 96-token test.
fn llama3_rope_factors(base: f32, dims: usize) -> Vec<f32> {
    let (factor, low, high, original) = (8.0f64, 1.0f64, 4.0f64, 64.0f64);
    let (low_wavelen, high_wavelen) = (original / low, original / high);
    (0..dims)
        .step_by(2)
        .map(|i| {
            let freq = 1.0 / (base as f64).powf(i as f64 / dims as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (original / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            f as f32
        })
        .collect()
}

/// Writes `family`'s twin with weights of `quant` to `path`; the same arguments give the same bytes.
pub fn write_twin(path: &Path, family: Family, quant: Quant) {
    write_twin_with(path, family, quant, &Tweak::default());
}

/// The RMS each layer's matrices give a unit-RMS input (see the module's note on margins). Measured on the
/// qwen2 and llama twins through candle: at 0.5 a new draw of the layers moved the logits by 15-20 % relative
/// RMS, at 1.0 by ~90 % with greedy margins still a third of the row's norm, at 1.5 the margins were gone.
const LAYER_GAIN: f64 = 1.0;

/// One feature of a twin taken out, to show that the tests would see it missing (families.rs).
#[derive(Debug, Clone, Default)]
pub struct Tweak {
    /// Leave `rope_freqs.weight` out (llama3).
    pub without_rope_freqs: bool,
    /// Write the same tensors under another `general.architecture` (smollm3 as llama: RoPE on every layer).
    pub architecture: Option<&'static str>,
    /// Another `attention.sliding_window` (gemma3).
    pub window: Option<usize>,
    /// `rope.scaling.type` and `rope.scaling.original_context_length`.
    pub rope_scaling: Option<(&'static str, usize)>,
    /// `rope.scaling.factor`.
    pub scaling_factor: Option<f32>,
    /// Write Phi-4-mini's short LongRoPE factors under the long ones' name too (phi4mini).
    pub short_factors_as_long: bool,
    /// `rope.scaling.attn_factor` (phi4mini writes its own).
    pub attn_factor: Option<f32>,
    /// Phi-4-mini's `rope.scaling.original_context_length` in place of [`PHI_ORIGINAL_CONTEXT`].
    pub phi_original: Option<usize>,
    /// `tokenizer.chat_template` (the twins have none).
    pub chat_template: Option<String>,
}

/// [`write_twin`] with one feature changed.
pub fn write_twin_with(path: &Path, family: Family, quant: Quant, tweak: &Tweak) {
    let vocab = if family.sentencepiece() { sentencepiece_vocab(family) } else { bpe_vocab() };
    let n_vocab = vocab.tokens.len();
    let (n_head, n_kv_head) = family.heads();
    let (q_dim, kv_dim) = (n_head * HEAD_DIM, n_kv_head * HEAD_DIM);
    let (matrix, wide, embed) = match quant {
        Quant::Q8_0 => (GgmlDType::Q8_0, GgmlDType::Q8_0, GgmlDType::Q8_0),
        Quant::KQuant => (GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q6K),
    };
    let seed = std::cell::Cell::new(1000 * (family as u64 + 1) + quant as u64);
    let mut next = |shape: &[usize], scale: f64| {
        seed.set(seed.get() + 1);
        random(shape, seed.get(), scale)
    };
    let q = |t: &Tensor, dtype: GgmlDType| QTensor::quantize(t, dtype).unwrap();
    // Uniform in ±s has variance s²/3: s = k·√(3/fan_in) keeps a unit-RMS input at RMS k.
    let weight = |rows: usize, cols: usize, next: &mut dyn FnMut(&[usize], f64) -> Tensor| {
        next(&[rows, cols], LAYER_GAIN * (3.0 / cols as f64).sqrt())
    };
    let norm = |n: usize, next: &mut dyn FnMut(&[usize], f64) -> Tensor| next(&[n], 0.1).affine(1.0, 1.0).unwrap();

    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let embedding = next(&[n_vocab, HIDDEN], 1.5);
    tensors.push(("token_embd.weight".into(), q(&embedding, embed)));
    if !family.tied() {
        // Row next(t) is token t's embedding: the stream's own token votes for its successor.
        let rows = embedding.to_vec2::<f32>().unwrap();
        let mut output = vec![vec![0f32; HIDDEN]; n_vocab];
        for (t, row) in rows.into_iter().enumerate() {
            output[next_token(t, n_vocab)] = row;
        }
        let output = Tensor::new(output, &Device::Cpu).unwrap();
        let output = (output + next(&[n_vocab, HIDDEN], 0.3)).unwrap();
        tensors.push(("output.weight".into(), q(&output, wide)));
    }
    tensors.push(("output_norm.weight".into(), q(&norm(HIDDEN, &mut next), GgmlDType::F32)));
    let rope_dims = family.rope_dims();
    match family {
        Family::Llama3 if !tweak.without_rope_freqs => {
            let factors = Tensor::new(llama3_rope_factors(family.rope_base(), rope_dims), &Device::Cpu).unwrap();
            tensors.push(("rope_freqs.weight".into(), q(&factors, GgmlDType::F32)));
        }
        Family::Phi4Mini => {
            // Shaped as Phi-4-mini's: rising from 1 with the pair's wavelength; the short ones stay near 1.
            let n = rope_dims / 2;
            let short: Vec<f32> = (0..n).map(|i| 1.0 + 0.5 * i as f32 / (n - 1) as f32).collect();
            let long: Vec<f32> = match tweak.short_factors_as_long {
                true => short.clone(),
                false => (0..n).map(|i| 1.0 + 15.0 * (i as f32 / (n - 1) as f32).powi(2)).collect(),
            };
            tensors.push((
                "rope_factors_long.weight".into(),
                q(&Tensor::new(long, &Device::Cpu).unwrap(), GgmlDType::F32),
            ));
            tensors.push((
                "rope_factors_short.weight".into(),
                q(&Tensor::new(short, &Device::Cpu).unwrap(), GgmlDType::F32),
            ));
        }
        _ => {}
    }
    for i in 0..family.n_layer() {
        let mut add = |name: &str, t: QTensor| tensors.push((format!("blk.{i}.{name}"), t));
        add("attn_norm.weight", q(&norm(HIDDEN, &mut next), GgmlDType::F32));
        add("ffn_norm.weight", q(&norm(HIDDEN, &mut next), GgmlDType::F32));
        if matches!(family, Family::Phi3 | Family::Phi4Mini) {
            add("attn_qkv.weight", q(&weight(q_dim + 2 * kv_dim, HIDDEN, &mut next), matrix));
            add("ffn_up.weight", q(&weight(2 * FFN, HIDDEN, &mut next), matrix));
        } else {
            add("attn_q.weight", q(&weight(q_dim, HIDDEN, &mut next), matrix));
            add("attn_k.weight", q(&weight(kv_dim, HIDDEN, &mut next), matrix));
            add("attn_v.weight", q(&weight(kv_dim, HIDDEN, &mut next), matrix));
            add("ffn_gate.weight", q(&weight(FFN, HIDDEN, &mut next), matrix));
            add("ffn_up.weight", q(&weight(FFN, HIDDEN, &mut next), matrix));
        }
        add("attn_output.weight", q(&weight(HIDDEN, q_dim, &mut next), matrix));
        add("ffn_down.weight", q(&weight(HIDDEN, FFN, &mut next), wide));
        if family == Family::Qwen2 {
            add("attn_q.bias", q(&next(&[q_dim], 0.3), GgmlDType::F32));
            add("attn_k.bias", q(&next(&[kv_dim], 0.3), GgmlDType::F32));
            add("attn_v.bias", q(&next(&[kv_dim], 0.3), GgmlDType::F32));
        }
        if matches!(family, Family::Qwen3 | Family::Gemma3) {
            add("attn_q_norm.weight", q(&norm(HEAD_DIM, &mut next), GgmlDType::F32));
            add("attn_k_norm.weight", q(&norm(HEAD_DIM, &mut next), GgmlDType::F32));
        }
        if family == Family::Gemma3 {
            // Large, as Gemma's own: the post-norms alone set how much each layer adds to a stream that the √hidden
            // scale made 16 times the embedding.
            add("post_attention_norm.weight", q(&(norm(HIDDEN, &mut next) * 3.0).unwrap(), GgmlDType::F32));
            add("post_ffw_norm.weight", q(&(norm(HIDDEN, &mut next) * 3.0).unwrap(), GgmlDType::F32));
        }
    }

    let arch = tweak.architecture.unwrap_or(family.architecture());
    let u32_key = |key: &str, v: usize| (format!("{arch}.{key}"), Value::U32(v as u32));
    let f32_key = |key: &str, v: f32| (format!("{arch}.{key}"), Value::F32(v));
    let mut metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        ("general.name".into(), Value::String(format!("{family:?} twin"))),
        u32_key("block_count", family.n_layer()),
        u32_key("context_length", CONTEXT),
        u32_key("embedding_length", HIDDEN),
        u32_key("feed_forward_length", FFN),
        u32_key("attention.head_count", n_head),
        u32_key("attention.head_count_kv", n_kv_head),
        f32_key("rope.freq_base", family.rope_base()),
        f32_key("attention.layer_norm_rms_epsilon", if family == Family::Phi3 { 1e-5 } else { 1e-6 }),
    ];
    match family {
        Family::Llama3 | Family::Llama | Family::SmolLm3 => {
            metadata.push(u32_key("vocab_size", n_vocab));
            metadata.push(u32_key("rope.dimension_count", rope_dims));
        }
        Family::Qwen3 | Family::Gemma3 => {
            metadata.push(u32_key("attention.key_length", HEAD_DIM));
            metadata.push(u32_key("attention.value_length", HEAD_DIM));
            if family == Family::Gemma3 {
                metadata.push(u32_key("attention.sliding_window", tweak.window.unwrap_or(GEMMA_WINDOW)));
            }
        }
        Family::Phi3 => {
            metadata.push(u32_key("rope.dimension_count", rope_dims));
            metadata.push(u32_key("rope.scaling.original_context_length", CONTEXT));
            metadata.push(u32_key("attention.sliding_window", 2047));
        }
        Family::Phi4Mini => {
            let original = tweak.phi_original.unwrap_or(PHI_ORIGINAL_CONTEXT);
            let scale = CONTEXT as f32 / original as f32;
            let attn_factor = (1.0 + scale.ln() / (original as f32).ln()).sqrt();
            metadata.push(u32_key("rope.dimension_count", rope_dims));
            metadata.push(u32_key("rope.scaling.original_context_length", original));
            metadata.push(f32_key("rope.scaling.attn_factor", attn_factor));
            metadata.push(u32_key("attention.sliding_window", 0));
        }
        Family::Qwen2 => {}
    }
    if let Some((kind, original)) = tweak.rope_scaling {
        metadata.push((format!("{arch}.rope.scaling.type"), Value::String(kind.into())));
        metadata.push(u32_key("rope.scaling.original_context_length", original));
    }
    if let Some(factor) = tweak.scaling_factor {
        metadata.push(f32_key("rope.scaling.factor", factor));
    }
    if let Some(factor) = tweak.attn_factor {
        metadata.push(f32_key("rope.scaling.attn_factor", factor));
    }
    if let Some(template) = &tweak.chat_template {
        metadata.push(("tokenizer.chat_template".into(), Value::String(template.clone())));
    }
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
    metadata.push(("tokenizer.ggml.tokens".into(), strings(&vocab.tokens)));
    metadata
        .push(("tokenizer.ggml.token_type".into(), Value::Array(vocab.types.iter().map(|&t| Value::I32(t)).collect())));
    metadata.push(("tokenizer.ggml.bos_token_id".into(), Value::U32(vocab.bos)));
    metadata.push(("tokenizer.ggml.eos_token_id".into(), Value::U32(vocab.eos)));
    if family.sentencepiece() {
        metadata.push(("tokenizer.ggml.model".into(), Value::String("llama".into())));
        metadata.push(("tokenizer.ggml.pre".into(), Value::String("default".into())));
        metadata.push((
            "tokenizer.ggml.scores".into(),
            Value::Array(vocab.scores.iter().map(|&s| Value::F32(s)).collect()),
        ));
        metadata.push(("tokenizer.ggml.unknown_token_id".into(), Value::U32(vocab.unk.unwrap_or(0))));
        if family == Family::Gemma3 {
            metadata.push(("tokenizer.ggml.padding_token_id".into(), Value::U32(0)));
        }
        metadata.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(true)));
        // Gemma's converter writes add_space_prefix false; Llama 2's and Phi-3's tokenizers add it.
        metadata.push(("tokenizer.ggml.add_space_prefix".into(), Value::Bool(family != Family::Gemma3)));
    } else {
        metadata.push(("tokenizer.ggml.model".into(), Value::String("gpt2".into())));
        metadata.push(("tokenizer.ggml.pre".into(), Value::String(family.pre_tokenizer().into())));
        metadata.push(("tokenizer.ggml.merges".into(), strings(&vocab.merges)));
        metadata.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(family == Family::Llama3)));
    }
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
}

/// Writes `whole` again as `count` files the way llama.cpp's `gguf-split` does (`STEM-00001-of-0000N.gguf` beside
/// it): the first holds every metadata key and the first tensors; each holds `split.no`, `split.count` and
/// `split.tensors.count`, and its share of the tensors in the whole file's order. Returns the parts' paths.
pub fn split_gguf(whole: &Path, count: usize) -> Vec<std::path::PathBuf> {
    let mut reader = std::fs::File::open(whole).unwrap();
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort_by_key(|name| content.tensor_infos[*name].offset);
    let tensors: Vec<(String, QTensor)> =
        names.iter().map(|name| ((*name).clone(), content.tensor(&mut reader, name, &Device::Cpu).unwrap())).collect();
    let stem = whole.file_stem().unwrap().to_str().unwrap();
    let per_part = tensors.len().div_ceil(count);
    (0..count)
        .map(|index| {
            let path = whole.with_file_name(format!("{stem}-{:05}-of-{count:05}.gguf", index + 1));
            let mut metadata = vec![
                ("split.no".to_string(), Value::U16(index as u16)),
                ("split.count".to_string(), Value::U16(count as u16)),
                ("split.tensors.count".to_string(), Value::I32(tensors.len() as i32)),
            ];
            if index == 0 {
                let mut keys: Vec<&String> = content.metadata.keys().collect();
                keys.sort();
                metadata.extend(keys.into_iter().map(|k| (k.clone(), content.metadata[k].clone())));
            }
            let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
            let share = tensors.iter().skip(index * per_part).take(per_part);
            let share: Vec<(&str, &QTensor)> = share.map(|(k, v)| (k.as_str(), v)).collect();
            gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &share).unwrap();
            path
        })
        .collect()
}
